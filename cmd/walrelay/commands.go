package main

import (
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/migrations"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/relay"
)

func runCommand() *cobra.Command {
	s := newSettings()
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Stream outbox inserts from PostgreSQL to Kafka until stopped (SIGINT/SIGTERM)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := s.load(cmd.Flags()); err != nil {
				return err
			}
			logger, err := s.logger()
			if err != nil {
				return err
			}
			cfg, err := s.relayConfig(cmd.Context(), logger)
			if cfg.Sink != nil {
				defer cfg.Sink.Close()
			}
			if err != nil {
				if cmd.Context().Err() != nil {
					return nil // stopped before the broker could be reached
				}
				return err
			}
			r, err := relay.New(cfg)
			if err != nil {
				return err
			}
			if err := r.Run(cmd.Context()); err != nil {
				return runtimeError{err}
			}
			return nil
		},
	}
	s.register(cmd.Flags())
	return cmd
}

func migrateCommand() *cobra.Command {
	s := newSettings()
	var notify bool
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or update the outbox schema (idempotent, versioned)",
		Long: "migrate applies walrelay's embedded SQL migrations: the outbox_events table and its partial\n" +
			"index, processed_events, the outbox_dead_letters view, walrelay_slots and the insert-only\n" +
			"publication \"walrelay\". Applied versions are recorded in walrelay_schema_version, so running\n" +
			"it again changes nothing.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := s.load(cmd.Flags()); err != nil {
				return err
			}
			if s.relay.DatabaseURL == "" {
				return fmt.Errorf("database url is required (--database-url or WALRELAY_DATABASE_URL)")
			}
			// A URL that does not parse is bad configuration (exit 2), not a runtime failure.
			if _, err := pgx.ParseConfig(s.relay.DatabaseURL); err != nil {
				return fmt.Errorf("database url: %w", err)
			}
			applied, err := migrations.Up(cmd.Context(), s.relay.DatabaseURL, nil)
			if err != nil {
				return runtimeError{err}
			}
			out := cmd.OutOrStdout()
			if len(applied) == 0 {
				fmt.Fprintln(out, "schema is up to date; nothing to apply")
			}
			for _, m := range applied {
				fmt.Fprintf(out, "applied migration %d (%s)\n", m.Version, m.Name)
			}
			if notify {
				if err := migrations.InstallNotify(cmd.Context(), s.relay.DatabaseURL); err != nil {
					return runtimeError{err}
				}
				fmt.Fprintf(out, "installed trigger walrelay_outbox_insert_notify (NOTIFY %s on each insert)\n", poller.NotifyChannel)
			}
			return nil
		},
	}
	s.register(cmd.Flags(), "database-url")
	cmd.Flags().BoolVar(&notify, "notify", false, "also install the insert trigger that wakes a poll-mode relay (LISTEN/NOTIFY)")
	return cmd
}
