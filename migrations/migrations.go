package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"
)

//go:embed sql/*.sql
var files embed.FS

// VersionTable records which migrations ran.
const VersionTable = "walrelay_schema_version"

// Result is one migration that Up applied.
type Result struct {
	Version int64
	Name    string
}

// Up applies every migration not yet recorded and returns those it applied (none
// when the schema is current).
func Up(ctx context.Context, databaseURL string, logger *slog.Logger) ([]Result, error) {
	connConfig, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	db := stdlib.OpenDB(*connConfig)
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("connect to postgresql: %w", err)
	}
	provider, err := newProvider(db, logger)
	if err != nil {
		return nil, err
	}
	applied, err := provider.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("apply migrations: %w", err)
	}
	out := make([]Result, 0, len(applied))
	for _, r := range applied {
		out = append(out, Result{Version: r.Source.Version, Name: r.Source.Path})
	}
	return out, nil
}

func newProvider(db *sql.DB, logger *slog.Logger) (*goose.Provider, error) {
	sqlFiles, err := fs.Sub(files, "sql")
	if err != nil {
		return nil, fmt.Errorf("open embedded migrations: %w", err)
	}
	store, err := database.NewStore(database.DialectPostgres, VersionTable)
	if err != nil {
		return nil, fmt.Errorf("migration store: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fmt.Errorf("migration lock: %w", err)
	}
	opts := []goose.ProviderOption{
		goose.WithStore(store),
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	}
	if logger != nil {
		opts = append(opts, goose.WithSlog(logger))
	}
	provider, err := goose.NewProvider("", db, sqlFiles, opts...)
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return provider, nil
}
