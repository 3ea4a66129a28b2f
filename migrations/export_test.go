package migrations

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/jackc/pgx/v5"
)

// DownTo undoes the embedded migrations above version, newest first, with their
// Down sections, and forgets them in the version table: a database as an older
// walrelay left it, for tests that migrate forward from there.
func DownTo(ctx context.Context, dbURL string, version int64) error {
	all, err := embedded()
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for i := len(all) - 1; i >= 0 && all[i].Version > version; i-- {
		data, err := files.ReadFile(path.Join("sql", all[i].Name))
		if err != nil {
			return err
		}
		_, down, _ := strings.Cut(string(data), "-- +goose Down")
		down = strings.NewReplacer("-- +goose StatementBegin", "", "-- +goose StatementEnd", "").Replace(down)
		if _, err := conn.Exec(ctx, down); err != nil {
			return fmt.Errorf("down %s: %w", all[i].Name, err)
		}
		if _, err := conn.Exec(ctx, "DELETE FROM "+VersionTable+" WHERE version_id = $1", all[i].Version); err != nil {
			return err
		}
	}
	return nil
}
