package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/ops"
	"github.com/walrelay/walrelay/settings"
)

func dlqCommand() *cobra.Command {
	cmd := groupCommand(&cobra.Command{
		Use:   "dlq",
		Short: "Inspect, retry and purge dead letters (rows that failed max-attempts times)",
		Long: "dlq lists, retries and purges dead letters in the outbox tables run relays: it takes the same\n" +
			"settings (--config, WALRELAY_*, the table and column settings, a file's tables list; with a\n" +
			"databases list, the entry --database names).",
	})
	cmd.AddCommand(dlqList(), dlqRetry(), dlqPurge())
	return cmd
}

// withDeadLetters loads the settings and opens the dead letters of the outbox
// tables (one, or the file's tables list) for one dlq subcommand.
func withDeadLetters(cmd *cobra.Command, s *settings.Settings, fn func(*ops.DeadLetters) error) error {
	if err := s.Load(cmd.Flags()); err != nil {
		return err
	}
	s.Warn(cmd.ErrOrStderr(), nil)
	s, err := oneDatabase(cmd, s)
	if err != nil {
		return err
	}
	pool, err := ops.OpenPool(cmd.Context(), s.Relay)
	if err != nil {
		return err
	}
	defer pool.Close()
	dl, err := ops.OpenDeadLetters(cmd.Context(), pool, s.Relay)
	if err != nil {
		return runtimeError{err}
	}
	if err := fn(dl); err != nil {
		return runtimeError{err}
	}
	return nil
}

func dlqList() *cobra.Command {
	s := newSettings()
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead letters, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit <= 0 {
				return fmt.Errorf("--limit must be positive")
			}
			return withDeadLetters(cmd, s, func(dl *ops.DeadLetters) error {
				letters, _, err := dl.List(cmd.Context(), 0, limit)
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if asJSON {
					enc := json.NewEncoder(out)
					enc.SetIndent("", "  ")
					return enc.Encode(letters)
				}
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tTABLE\tEVENT TYPE\tAGGREGATE\tATTEMPTS\tDEAD SINCE\tLAST ERROR")
				for _, d := range letters {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s/%s\t%d\t%s\t%s\n", d.ID, d.Table, d.EventType, d.AggregateType, d.AggregateID,
						d.Attempts, d.DeadLetteredAt.UTC().Format(time.RFC3339), oneLine(d.LastError, 80))
				}
				tw.Flush()
				fmt.Fprintf(out, "%d dead letter(s)\n", len(letters))
				return nil
			})
		},
	}
	s.Register(cmd.Flags(), append([]string{"database-url", "primary-url", "database-auth"}, tableSettings...)...)
	databaseFlag(cmd, "work on")
	cmd.Flags().IntVar(&limit, "limit", 100, "list at most this many")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	return cmd
}

func dlqRetry() *cobra.Command {
	s := newSettings()
	var ids []string
	var all bool
	cmd := &cobra.Command{
		Use:   "retry (--id ID ... | --all)",
		Short: "Give dead letters a fresh set of attempts; the poller publishes them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (len(ids) == 0) == !all {
				return fmt.Errorf("give either --id (one or more) or --all")
			}
			return withDeadLetters(cmd, s, func(dl *ops.DeadLetters) error {
				n, err := dl.Retry(cmd.Context(), ids, all)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "reset %d dead letter(s); the poller will publish them\n", n)
				return nil
			})
		},
	}
	s.Register(cmd.Flags(), append([]string{"database-url", "primary-url", "database-auth"}, tableSettings...)...)
	databaseFlag(cmd, "work on")
	cmd.Flags().StringSliceVar(&ids, "id", nil, "event id to retry (repeat or comma-separate)")
	cmd.Flags().BoolVar(&all, "all", false, "retry every dead letter")
	return cmd
}

func dlqPurge() *cobra.Command {
	s := newSettings()
	var ids []string
	var olderThan time.Duration
	cmd := &cobra.Command{
		Use:   "purge (--id ID ... | --older-than DURATION)",
		Short: "Delete dead letters for good",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (len(ids) == 0) == (olderThan == 0) {
				return fmt.Errorf("give either --id (one or more) or --older-than (e.g. 720h)")
			}
			if olderThan < 0 {
				return fmt.Errorf("--older-than must be positive")
			}
			return withDeadLetters(cmd, s, func(dl *ops.DeadLetters) error {
				n, err := dl.Purge(cmd.Context(), ids, olderThan)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted %d dead letter(s)\n", n)
				return nil
			})
		},
	}
	s.Register(cmd.Flags(), append([]string{"database-url", "primary-url", "database-auth"}, tableSettings...)...)
	databaseFlag(cmd, "work on")
	cmd.Flags().StringSliceVar(&ids, "id", nil, "event id to delete (repeat or comma-separate)")
	cmd.Flags().DurationVar(&olderThan, "older-than", 0, "delete dead letters older than this (e.g. 720h)")
	return cmd
}

func oneLine(s string, n int) string {
	out := []rune{}
	for _, r := range s {
		if r == '\n' || r == '\t' {
			r = ' '
		}
		out = append(out, r)
		if len(out) == n {
			return string(out) + "…"
		}
	}
	return string(out)
}
