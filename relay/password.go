package relay

import (
	"context"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/dbconn"
)

// setPassword puts the password Config.DatabasePassword gives into a connection's
// configuration just before it connects; without DatabasePassword the URL's stays.
func (c Config) setPassword(ctx context.Context, cfg *pgconn.Config) error {
	return dbconn.SetPassword(ctx, c.DatabasePassword, cfg)
}
