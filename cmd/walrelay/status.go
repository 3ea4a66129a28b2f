package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/relay"
)

// problemsFound makes `status` exit 1 after printing its report.
type problemsFound int

func (p problemsFound) Error() string { return fmt.Sprintf("%d problem(s) found", int(p)) }

func statusCommand() *cobra.Command {
	s := newSettings()
	limits := relay.StatusLimits{StallTimeout: 5 * time.Minute}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Report the slot, publication, pending rows and dead letters; exit 1 when something is wrong",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := s.load(cmd.Flags()); err != nil {
				return err
			}
			s.warn(cmd.ErrOrStderr(), nil)
			if s.relay.DatabaseURL == "" {
				return fmt.Errorf("database url is required (--database-url or WALRELAY_DATABASE_URL)")
			}
			st, err := relay.ReadStatus(cmd.Context(), s.relay, limits)
			if err != nil {
				return runtimeError{err}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(st); err != nil {
					return runtimeError{err}
				}
			} else {
				printStatus(cmd, st)
			}
			if len(st.Problems) > 0 {
				return runtimeError{problemsFound(len(st.Problems))}
			}
			return nil
		},
	}
	s.register(cmd.Flags(), "database-url", "table", "slot", "publication", "mode")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	cmd.Flags().Int64Var(&limits.MaxDeadLetters, "max-dead-letters", 0, "more dead letters than this is a problem")
	cmd.Flags().DurationVar(&limits.StallTimeout, "stall-timeout", limits.StallTimeout,
		"an active, lagging slot without a status update for this long is stalled")
	return cmd
}

func printStatus(cmd *cobra.Command, st *relay.Status) {
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	yesNo := map[bool]string{true: "yes", false: "no"}
	fmt.Fprintf(tw, "slot\t%s (exists: %s, active: %s)\n", st.Slot, yesNo[st.SlotExists], yesNo[st.SlotActive])
	if st.SlotExists {
		fmt.Fprintf(tw, "confirmed lsn\t%s\n", st.ConfirmedLSN)
		fmt.Fprintf(tw, "lag\t%d bytes\n", st.LagBytes)
		fmt.Fprintf(tw, "wal status\t%s\n", st.WALStatus)
	}
	if st.LastConfirm != nil {
		fmt.Fprintf(tw, "last confirm\t%s (%s ago)\n", st.LastConfirm.UTC().Format(time.RFC3339),
			time.Since(*st.LastConfirm).Round(time.Millisecond))
	}
	if st.SlotReplacedAt != nil {
		fmt.Fprintf(tw, "slot replaced\t%s: %s\n", st.SlotReplacedAt.UTC().Format(time.RFC3339), st.SlotReplacedReason)
	}
	if st.PublishedHorizonAt != nil {
		fmt.Fprintf(tw, "published horizon\t%s (%s ago)\n", st.PublishedHorizonAt.UTC().Format(time.RFC3339),
			time.Since(*st.PublishedHorizonAt).Round(time.Millisecond))
	}
	fmt.Fprintf(tw, "publication\t%s (exists: %s)\n", st.Publication, yesNo[st.PublicationExists])
	fmt.Fprintf(tw, "pending rows\t%d\n", st.PendingRows)
	fmt.Fprintf(tw, "oldest pending\t%s\n", (time.Duration(st.OldestPendingAge * float64(time.Second))).Round(time.Second))
	fmt.Fprintf(tw, "dead letters\t%d\n", st.DeadLetters)
	if len(st.Tables) > 1 {
		for _, t := range st.Tables {
			fmt.Fprintf(tw, "table %s\tpending rows %d, oldest pending %s, dead letters %d\n", t.Table, t.PendingRows,
				(time.Duration(t.OldestPendingAge * float64(time.Second))).Round(time.Second), t.DeadLetters)
		}
	}
	tw.Flush()
	if len(st.Problems) == 0 {
		fmt.Fprintln(cmd.OutOrStdout(), "status: OK")
		return
	}
	for _, p := range st.Problems {
		fmt.Fprintln(cmd.OutOrStdout(), "problem:", p)
	}
}
