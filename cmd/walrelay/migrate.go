package main

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/internal/dbconn"
	"github.com/walrelay/walrelay/migrations"
	"github.com/walrelay/walrelay/poller"
)

var migrateTableName = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_$]*\.)?[A-Za-z_][A-Za-z0-9_$]*$`)

func migrateCommand() *cobra.Command {
	s := newSettings()
	var notify, dryRun bool
	var lockTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or adopt the outbox schema (idempotent)",
		Long: "migrate creates walrelay's tables (processed_events, walrelay_slots; versions recorded in\n" +
			"walrelay_schema_version) and creates or adopts the outbox table (--table, --column-*): it adds\n" +
			"only what is missing (the bookkeeping columns attempts, processed_at, retry_after, last_error and\n" +
			"dead_lettered_at, nullable or defaulted so the application's INSERT is unchanged; the partial\n" +
			"indexes; the dead-letter view; the insert-only publication). Everything runs in one transaction,\n" +
			"except CREATE INDEX CONCURRENTLY for tables over 100,000 rows, which runs after it. An object of\n" +
			"walrelay's name that means something else is reported, with what to do, and nothing is changed.\n" +
			"Running it again changes nothing. --dry-run prints the SQL instead.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := s.Load(cmd.Flags()); err != nil {
				return err
			}
			s.Warn(cmd.ErrOrStderr(), nil)
			if s.Relay.DatabaseURL == "" {
				return fmt.Errorf("database url is required (--database-url or WALRELAY_DATABASE_URL)")
			}
			// A URL that does not parse is bad configuration (exit 2), not a runtime failure.
			if _, err := pgx.ParseConfig(s.Relay.DatabaseURL); err != nil {
				return fmt.Errorf("database url: %w", dbconn.ParseError(err, s.Relay.DatabaseURL))
			}
			if !migrateTableName.MatchString(s.Relay.Table) {
				return fmt.Errorf("table %q is not a table name (name or schema.name)", s.Relay.Table)
			}
			if !migrateTableName.MatchString(s.Relay.Publication) || len(s.Relay.Publication) > 63 {
				return fmt.Errorf("publication %q is not a valid name", s.Relay.Publication)
			}
			if err := s.Relay.Columns.Validate(); err != nil {
				return err
			}
			if lockTimeout <= 0 {
				return fmt.Errorf("--lock-timeout must be positive, got %s", lockTimeout)
			}
			out := cmd.OutOrStdout()
			rep, err := migrations.Migrate(cmd.Context(), migrations.Options{
				DatabaseURL: s.Relay.DatabaseURL, Password: s.Relay.DatabasePassword, Table: s.Relay.Table, Columns: s.Relay.Columns,
				Publication: s.Relay.Publication, DryRun: dryRun, LockTimeout: lockTimeout, Out: out,
			})
			if err != nil {
				var conflicts *migrations.ConflictError
				if errors.As(err, &conflicts) {
					return runtimeError{err}
				}
				return runtimeError{fmt.Errorf("migrate: %w", err)}
			}
			if rep.WALLevel != "logical" {
				fmt.Fprintf(cmd.ErrOrStderr(), "walrelay: warning: wal_level is %s: walrelay run streams only with wal_level = logical; "+
					"set it in postgresql.conf (or ALTER SYSTEM SET wal_level = logical) and restart PostgreSQL before you start it, "+
					"or run it with --mode poll, which needs no replication\n", rep.WALLevel)
			}
			if dryRun {
				if notify {
					fmt.Fprintln(out, "-- and, with --notify, the insert trigger walrelay_outbox_insert_notify")
				}
				return nil
			}
			if len(rep.Applied) == 0 && len(rep.Steps) == 0 {
				fmt.Fprintln(out, "schema is up to date; nothing to apply")
			}
			if notify {
				if err := migrations.InstallNotifyWith(cmd.Context(),
					migrations.Options{DatabaseURL: s.Relay.DatabaseURL, Password: s.Relay.DatabasePassword}, s.Relay.Table, s.Relay.Columns.ID); err != nil {
					return runtimeError{err}
				}
				fmt.Fprintf(out, "installed trigger walrelay_outbox_insert_notify (NOTIFY %s on each insert)\n", poller.NotifyChannel)
			}
			return nil
		},
	}
	s.Register(cmd.Flags(), "database-url", "database-auth", "table", "publication", "column-id", "column-aggregate-type",
		"column-aggregate-id", "column-event-type", "column-payload", "column-created-at")
	cmd.Flags().BoolVar(&notify, "notify", false, "also install the insert trigger that wakes a poll-mode relay (LISTEN/NOTIFY)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the SQL migrate would run, and change nothing")
	cmd.Flags().DurationVar(&lockTimeout, "lock-timeout", 10*time.Second,
		"longest wait for a lock on a table inside the migration (the application's writes queue behind the wait)")
	return cmd
}
