package relay

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/internal/redact"
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

// OpenPool opens a connection pool for the commands that read the outbox beside a
// relay (dlq, replay), where BooksURL says the rows are; each new connection asks
// DatabasePassword.
func OpenPool(ctx context.Context, cfg Config) (*pgxpool.Pool, error) {
	url, err := BooksURL(ctx, cfg)
	if err != nil {
		return nil, err
	}
	poolCfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", redact.Error(err, url))
	}
	if cfg.DatabasePassword != nil {
		poolCfg.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
			return cfg.setPassword(ctx, &cc.Config)
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	return pool, nil
}
