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
	"github.com/walrelay/walrelay/settings"
)

var migrateTableName = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_$]*\.)?[A-Za-z_][A-Za-z0-9_$]*$`)

func migrateCommand() *cobra.Command {
	s := newSettings()
	var notify, dryRun bool
	var lockTimeout time.Duration
	var grantTo string
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
			if lockTimeout <= 0 {
				return fmt.Errorf("--lock-timeout must be positive, got %s", lockTimeout)
			}
			entries, err := databaseEntries(cmd, s, true)
			if err != nil {
				return err
			}
			for _, d := range entries {
				if len(entries) > 1 {
					fmt.Fprintf(cmd.OutOrStdout(), "database %s\n", d.Name())
				}
				if err := migrateDatabase(cmd, d, dryRun, notify, lockTimeout, grantTo); err != nil {
					if d.Name() != "" {
						return prefixError("database "+d.Name()+": ", err)
					}
					return err
				}
			}
			return nil
		},
	}
	s.Register(cmd.Flags(), "database-url", "owner-url", "primary-url", "database-auth", "table", "publication", "column-id",
		"column-aggregate-type", "column-aggregate-id", "column-event-type", "column-payload", "column-created-at",
		"mode", "on-publish", "retention") // the last four say what --grant-to grants
	databaseFlag(cmd, "migrate (empty: every database of the list)")
	cmd.Flags().StringVar(&grantTo, "grant-to", "", "also grant this role what run, status, dlq and replay need for the configured "+
		"--on-publish mode, --retention and tables, and print what only a superuser can give it")
	cmd.Flags().BoolVar(&notify, "notify", false, "also install the insert trigger that wakes a poll-mode relay (LISTEN/NOTIFY)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the SQL migrate would run, and change nothing")
	cmd.Flags().DurationVar(&lockTimeout, "lock-timeout", 10*time.Second,
		"longest wait for a lock on a table inside the migration (the application's writes queue behind the wait)")
	return cmd
}

// migrateDatabase migrates one database: each outbox table of its settings (a
// file's tables list, or --table), connecting as owner-url (else database-url).
func migrateDatabase(cmd *cobra.Command, s *settings.Settings, dryRun, notify bool, lockTimeout time.Duration, grantTo string) error {
	dbURL := s.OwnerURL
	if dbURL == "" {
		dbURL = s.Relay.DatabaseURL
	}
	if dbURL == "" {
		return fmt.Errorf("database url is required (--database-url or WALRELAY_DATABASE_URL; --owner-url for migrate alone)")
	}
	// A URL that does not parse is bad configuration (exit 2), not a runtime failure.
	if _, err := pgx.ParseConfig(dbURL); err != nil {
		return fmt.Errorf("database url: %w", dbconn.ParseError(err, dbURL))
	}
	if !migrateTableName.MatchString(s.Relay.Publication) || len(s.Relay.Publication) > 63 {
		return fmt.Errorf("publication %q is not a valid name", s.Relay.Publication)
	}
	tables := s.Relay.OutboxTables()
	for _, t := range tables {
		if !migrateTableName.MatchString(t.Table) {
			return fmt.Errorf("table %q is not a table name (name or schema.name)", t.Table)
		}
		if err := t.Columns.Validate(); err != nil {
			return err
		}
	}
	out := cmd.OutOrStdout()
	password := s.Relay.DatabasePassword
	if s.OwnerURL != "" {
		password = nil // the owner's URL carries its own credentials
	}
	for _, t := range tables {
		rep, err := migrations.Migrate(cmd.Context(), migrations.Options{
			DatabaseURL: dbURL, Password: password, Table: t.Table, Columns: t.Columns,
			Publication: s.Relay.Publication, Listed: len(tables) > 1, DryRun: dryRun, LockTimeout: lockTimeout, Out: out,
		})
		if err != nil {
			var conflicts *migrations.ConflictError
			if errors.As(err, &conflicts) {
				return runtimeError{err}
			}
			return runtimeError{fmt.Errorf("migrate: %w", err)}
		}
		if rep.WALLevel != "logical" && t.Table == tables[0].Table {
			fmt.Fprintf(cmd.ErrOrStderr(), "walrelay: warning: wal_level is %s: walrelay run streams only with wal_level = logical; "+
				"set it in postgresql.conf (or ALTER SYSTEM SET wal_level = logical) and restart PostgreSQL before you start it, "+
				"or run it with --mode poll, which needs no replication\n", rep.WALLevel)
		}
		if dryRun {
			if notify {
				fmt.Fprintln(out, "-- and, with --notify, the insert trigger walrelay_outbox_insert_notify")
			}
			continue
		}
		if len(rep.Applied) == 0 && len(rep.Steps) == 0 {
			fmt.Fprintf(out, "schema is up to date for %s; nothing to apply\n", t.Table)
		}
		if notify {
			if err := migrations.InstallNotifyWith(cmd.Context(),
				migrations.Options{DatabaseURL: dbURL, Password: password}, t.Table, t.Columns.ID); err != nil {
				return runtimeError{err}
			}
			fmt.Fprintf(out, "installed trigger walrelay_outbox_insert_notify on %s (NOTIFY %s on each insert)\n", t.Table, poller.NotifyChannel)
		}
	}
	if grantTo != "" {
		return grantRelayRole(cmd, s, dbURL, password, grantTo, dryRun)
	}
	return nil
}

// prefixError puts prefix before err's message, keeping what it is: a runtime
// failure (exit 1) or a configuration error (exit 2).
func prefixError(prefix string, err error) error {
	var rt runtimeError
	if errors.As(err, &rt) {
		return runtimeError{fmt.Errorf("%s%w", prefix, rt.err)}
	}
	return fmt.Errorf("%s%w", prefix, err)
}
