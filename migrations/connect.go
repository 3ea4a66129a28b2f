package migrations

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/dbconn"
)

// connect opens one connection to o.DatabaseURL, with the password o.Password gives
// when it is set (asked now, so an expiring token is fresh).
func (o Options) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(o.DatabaseURL)
	if err != nil {
		return nil, dbconn.ParseError(err, o.DatabaseURL)
	}
	if o.Password != nil {
		if cfg.Password, err = o.Password(ctx); err != nil {
			return nil, fmt.Errorf("database password (--database-auth): %w", err)
		}
	}
	return pgx.ConnectConfig(ctx, cfg)
}
