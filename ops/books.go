package ops

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/internal/dbconn"
	"github.com/walrelay/walrelay/relay"
)

// BooksURL is where the commands beside a relay (status, dlq, replay) find the outbox
// rows and walrelay's records: --primary-url (or the read-write server of a multi-host
// --database-url) while --database-url is a hot standby, --database-url otherwise,
// also once that standby was promoted. It decides as the
// relay does (docs/postgresql.md, "Decoding on a standby"), so both read and write
// the same place.
func BooksURL(ctx context.Context, cfg relay.Config) (string, error) {
	primary := dbconn.PrimaryURL(cfg.PrimaryURL, cfg.DatabaseURL)
	if primary == "" {
		return cfg.DatabaseURL, nil
	}
	conn, err := dbconn.Connect(ctx, cfg.DatabaseURL, cfg.DatabasePassword)
	if err != nil {
		return "", fmt.Errorf("find out whether --database-url is a standby: %w", err)
	}
	defer conn.Close(context.Background())
	standby, err := dbconn.InRecovery(ctx, conn)
	if err != nil {
		return "", err
	}
	if !standby {
		return cfg.DatabaseURL, nil
	}
	return primary, nil
}

// OpenPool opens a connection pool for the commands that read the outbox beside a
// relay (dlq, replay), where BooksURL says the rows are; each new connection asks
// DatabasePassword.
func OpenPool(ctx context.Context, cfg relay.Config) (*pgxpool.Pool, error) {
	url, err := BooksURL(ctx, cfg)
	if err != nil {
		return nil, err
	}
	poolCfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", dbconn.ParseError(err, url))
	}
	if cfg.DatabasePassword != nil {
		poolCfg.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
			return dbconn.SetPassword(ctx, cfg.DatabasePassword, &cc.Config)
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	return pool, nil
}
