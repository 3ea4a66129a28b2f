package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/ops"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/settings"
)

// statusFailed ends `walrelay status` with code after it printed its report.
type statusFailed struct{ code int }

func (e statusFailed) Error() string { return fmt.Sprintf("status: exit code %d", e.code) }

// tableSettings map the outbox table and its columns: every subcommand that reads
// the table takes them, as run does (a file's tables list too).
var tableSettings = []string{"table", "column-id", "column-aggregate-type", "column-aggregate-id", "column-event-type",
	"column-payload", "column-created-at", "column-headers", "column-partition", "column-trace"}

func statusCommand() *cobra.Command {
	s := newSettings()
	limits := ops.StatusLimits{MaxPendingAge: 30 * time.Second}
	var asJSON bool
	var stallTimeout time.Duration
	var only string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Say whether the outbox is being relayed: slot, relay, pending rows, dead letters; exit non-zero when not",
		Long: "status reads the slot, the publication and the outbox tables, and asks the relay itself (GET /readyz\n" +
			"on --admin-url, or on --metrics-addr where the relay serves it). With the slot on a hot standby\n" +
			"(--primary-url set), the slot is read on the standby and the tables on the primary, as the relay writes them.\n" +
			"It exits 0 when events are relayed, otherwise with the code of the first problem in this list:\n" +
			"  3  the database cannot be read\n" +
			"  6  the relay answers that it is not ready (or cannot be reached at --admin-url)\n" +
			"  4  no relay streams the slot (it does not exist, no walsender holds it, or its walsender has not heard\n" +
			"     from the relay within wal_sender_timeout)\n" +
			"  5  a pending row is older than --max-pending-age, or a retry is that long overdue\n" +
			"  1  the slot is lost or was replaced in the last day, the publication is missing, or there are more\n" +
			"     dead letters than --max-dead-letters\n" +
			"  2  bad usage or configuration\n" +
			"It takes the settings run takes (--config, WALRELAY_*, the table and column settings, a file's tables list).\n" +
			"With a file's databases list it reports each database (or the one --database names) and exits with\n" +
			"the code of the first problem of any.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := s.Load(cmd.Flags()); err != nil {
				return err
			}
			s.Warn(cmd.ErrOrStderr(), nil)
			if len(s.DatabaseNames()) > 0 || only != "" {
				return statusDatabases(cmd, s, only, limits, asJSON)
			}
			if s.Relay.DatabaseURL == "" {
				return fmt.Errorf("database url is required (--database-url or WALRELAY_DATABASE_URL)")
			}
			if stallTimeout > 0 && !cmd.Flags().Changed("max-pending-age") {
				limits.MaxPendingAge = stallTimeout
			}
			var err error
			if limits.RelayURL, limits.RelayRequired, err = adminURL(s); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			st, err := readStatus(cmd.Context(), s.Relay, limits)
			code := ops.StatusExitCode(st.Problems)
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(ops.NewStatusReport(st)); err != nil {
					return runtimeError{err}
				}
			} else {
				printStatus(out, st, err == nil)
			}
			if code != 0 {
				return statusFailed{code}
			}
			return nil
		},
	}
	s.Register(cmd.Flags(), append([]string{"database-url", "primary-url", "database-auth", "slot", "publication", "mode", "on-publish", "metrics-addr",
		"admin-url"}, tableSettings...)...)
	cmd.Flags().StringVar(&only, "database", "", "with a file's databases list: report this database of it alone (empty: each)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts (the same checks, with ok and exit_code)")
	cmd.Flags().Int64Var(&limits.MaxDeadLetters, "max-dead-letters", 0, "more dead letters than this is a problem")
	cmd.Flags().DurationVar(&limits.MaxPendingAge, "max-pending-age", limits.MaxPendingAge,
		"a pending row older than this (or a retry overdue by this much) is a problem; 0: no bound")
	cmd.Flags().DurationVar(&stallTimeout, "stall-timeout", 0, "the bound on a pending row's age")
	_ = cmd.Flags().MarkDeprecated("stall-timeout", "use --max-pending-age")
	return cmd
}

// readStatus is ops.ReadStatus, with a database that cannot be read as its problem,
// and the loaded URLs redacted in what it says.
func readStatus(ctx context.Context, cfg relay.Config, limits ops.StatusLimits) (*ops.Status, error) {
	st, err := ops.ReadStatus(ctx, cfg, limits)
	if err != nil {
		st = &ops.Status{Slot: cfg.Slot, Publication: cfg.Publication,
			Problems: []ops.Problem{{Check: ops.CheckDatabase, Message: explain(err).Error()}}}
	}
	redactStatus(st)
	return st, err
}

// databasesReport is what status --json prints for a databases list: each
// database's report, by name, and the verdict of them all.
type databasesReport struct {
	Databases map[string]ops.StatusReport `json:"databases"`
	OK        bool                        `json:"ok"`
	ExitCode  int                         `json:"exit_code"`
}

// statusDatabases is status for each database of the file's databases list, or
// the one only names: each asked of the relay as /readyz?database=NAME.
func statusDatabases(cmd *cobra.Command, s *settings.Settings, only string, limits ops.StatusLimits, asJSON bool) error {
	if len(s.DatabaseNames()) == 0 {
		return fmt.Errorf("--database %s: the configuration lists no databases (a file's databases: list)", only)
	}
	entries, err := s.Databases(cmd.Flags())
	if err != nil {
		return err
	}
	if entries, err = namedEntry(entries, only); err != nil {
		return err
	}
	var relayURL string
	if relayURL, limits.RelayRequired, err = adminURL(s); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	report := databasesReport{Databases: map[string]ops.StatusReport{}}
	var all []ops.Problem
	for _, d := range entries {
		if d.Relay.DatabaseURL == "" {
			return fmt.Errorf("database %s: database-url is missing; set it in its entry or at the top level", d.Name())
		}
		l := limits
		l.RelayURL, l.RelayDatabase = relayURL, d.Name()
		st, err := readStatus(cmd.Context(), d.Relay, l)
		all = append(all, st.Problems...)
		if asJSON {
			report.Databases[d.Name()] = ops.NewStatusReport(st)
			continue
		}
		fmt.Fprintf(out, "database %s\n", d.Name())
		printStatus(out, st, err == nil)
		fmt.Fprintln(out)
	}
	code := ops.StatusExitCode(all)
	if asJSON {
		report.OK, report.ExitCode = code == 0, code
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return runtimeError{err}
		}
	}
	if code != 0 {
		return statusFailed{code}
	}
	return nil
}

// adminURL is where status asks the relay: --admin-url (then an unreachable relay
// is a problem), else the relay's --metrics-addr when set (loopback for a wildcard
// address; an unreachable relay is only reported), else nowhere.
func adminURL(s *settings.Settings) (url string, required bool, err error) {
	if s.AdminURL != "" {
		u := strings.TrimSuffix(s.AdminURL, "/")
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			u = "http://" + u
		}
		return u, true, nil
	}
	if s.Admin.Addr == "" {
		return "", false, nil
	}
	host, port, err := net.SplitHostPort(s.Admin.Addr)
	if err != nil {
		return "", false, fmt.Errorf("metrics-addr %q: %w", s.Admin.Addr, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port), false, nil
}

func printStatus(w io.Writer, st *ops.Status, read bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	yesNo := map[bool]string{true: "yes", false: "no"}
	ago := func(t time.Time) string {
		return fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.RFC3339), time.Since(t).Round(time.Millisecond))
	}
	if read {
		fmt.Fprintf(tw, "slot\t%s (exists: %s, streamed: %s)\n", st.Slot, yesNo[st.SlotExists], yesNo[st.SlotActive])
		if st.SlotExists {
			fmt.Fprintf(tw, "confirmed lsn\t%s\n", st.ConfirmedLSN)
			fmt.Fprintf(tw, "lag\t%d bytes\n", st.LagBytes)
			fmt.Fprintf(tw, "wal status\t%s\n", st.WALStatus)
		}
		if st.LastStatusUpdate != nil {
			fmt.Fprintf(tw, "last status update\t%s\n", ago(*st.LastStatusUpdate))
		}
		if st.SlotReplacedAt != nil {
			fmt.Fprintf(tw, "slot replaced\t%s: %s\n", st.SlotReplacedAt.UTC().Format(time.RFC3339), st.SlotReplacedReason)
		}
		if st.PublishedHorizonAt != nil {
			fmt.Fprintf(tw, "published horizon\t%s\n", ago(*st.PublishedHorizonAt))
		}
		fmt.Fprintf(tw, "publication\t%s (exists: %s)\n", st.Publication, yesNo[st.PublicationExists])
		fmt.Fprintf(tw, "pending rows\t%d (%d retrying)\n", st.PendingRows, st.RetryingRows)
		fmt.Fprintf(tw, "oldest pending\t%s\n", seconds(st.OldestPendingAge))
		fmt.Fprintf(tw, "dead letters\t%d\n", st.DeadLetters)
		if len(st.Tables) > 1 {
			for _, t := range st.Tables {
				fmt.Fprintf(tw, "table %s\tpending rows %d (%d retrying), oldest pending %s, dead letters %d\n", t.Table,
					t.PendingRows, t.RetryingRows, seconds(t.OldestPendingAge), t.DeadLetters)
			}
		}
	}
	if h := st.Relay; h != nil {
		switch {
		case !h.Reachable:
			fmt.Fprintf(tw, "relay\t%s: not reachable (%s)\n", h.URL, h.Error)
		default:
			fmt.Fprintf(tw, "relay\t%s: %s (ready: %s)\n", h.URL, h.Answer, yesNo[h.Ready])
			confirmed := "not since it started"
			if h.EventsConfirmedAt != nil {
				confirmed = ago(*h.EventsConfirmedAt)
			}
			fmt.Fprintf(tw, "events last confirmed\t%s\n", confirmed)
		}
	}
	tw.Flush()
	if len(st.Problems) == 0 {
		fmt.Fprintln(w, "status: OK")
		return
	}
	for _, p := range st.Problems {
		fmt.Fprintf(w, "problem (%s): %s\n", p.Check, p.Message)
	}
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Second)
}
