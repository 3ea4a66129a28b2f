package relay

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/redact"
)

// BooksURL is where the commands beside a relay (status, dlq, replay) find the outbox
// rows and walrelay's records: --primary-url (or the read-write server of a multi-host
// --database-url) while --database-url is a hot standby, --database-url otherwise,
// also once that standby was promoted. It decides as the
// relay does (docs/postgresql.md, "Decoding on a standby"), so both read and write
// the same place.
func BooksURL(ctx context.Context, cfg Config) (string, error) {
	primary := cfg.primaryURL()
	if primary == "" {
		return cfg.DatabaseURL, nil
	}
	conn, err := connectTo(ctx, cfg, cfg.DatabaseURL)
	if err != nil {
		return "", fmt.Errorf("find out whether --database-url is a standby: %w", err)
	}
	defer conn.Close(context.Background())
	standby, err := inRecovery(ctx, conn)
	if err != nil {
		return "", err
	}
	if !standby {
		return cfg.DatabaseURL, nil
	}
	return primary, nil
}

// connectTo opens one connection on url with cfg's password hook.
func connectTo(ctx context.Context, cfg Config, url string) (*pgx.Conn, error) {
	connCfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, errorf("parse database url", redact.Error(err, url))
	}
	if err := cfg.setPassword(ctx, &connCfg.Config); err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, connCfg)
	if err != nil {
		return nil, errorf("connect to postgresql", err)
	}
	return conn, nil
}

// inRecovery says whether conn's server is a standby.
func inRecovery(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var standby bool
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&standby); err != nil {
		return false, fmt.Errorf("find out whether the database is a standby: %w", err)
	}
	return standby, nil
}
