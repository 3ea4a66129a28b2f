package relay

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// setPassword puts the password Config.DatabasePassword gives into a connection's
// configuration just before it connects; without DatabasePassword the URL's stays.
func (c Config) setPassword(ctx context.Context, cfg *pgconn.Config) error {
	if c.DatabasePassword == nil {
		return nil
	}
	pw, err := c.DatabasePassword(ctx)
	if err != nil {
		return fmt.Errorf("database password (--database-auth): %w", err)
	}
	cfg.Password = pw
	return nil
}
