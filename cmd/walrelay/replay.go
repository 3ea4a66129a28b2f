package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/ops"
	"github.com/walrelay/walrelay/sink/sinks"
)

func replayCommand() *cobra.Command {
	s := newSettings()
	var f ops.ReplayFilter
	var since, until string
	var dryRun, ignorePause bool
	var rate float64
	cmd := &cobra.Command{
		Use:   "replay [--since T] [--until T] [--aggregate-type X] [--aggregate-id X] [--event-type X] [--id ID ...]",
		Short: "Publish again events still in the outbox table, by time, aggregate, event type or id",
		Long: "replay publishes again the outbox rows that match every filter given, oldest first, through the sink\n" +
			"run uses and in its record format, with the same id header (consumers that deduplicate drop what they\n" +
			"have) and a walrelay_replay header naming the replay. It reads the table and writes nothing: the slot\n" +
			"and pending rows' bookkeeping stay as they are. It refuses up front where the rows are gone: with\n" +
			"--on-publish delete, and for a --since older than --retention. --since and --until take a time\n" +
			"(RFC 3339, e.g. 2026-01-02T15:04:05Z) or a duration before now (e.g. 2h).\n" +
			"A paused relay publishes nothing, replays included: replay first asks the relay at --admin-url (else\n" +
			"its --metrics-addr, sending --admin-token) whether it is paused, and refuses while it is, unless\n" +
			"--ignore-pause; when it cannot reach the relay it says so and replays anyway.\n" +
			"It takes the settings run takes (--config, WALRELAY_*, the sink, table and column settings).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := s.Load(cmd.Flags()); err != nil {
				return err
			}
			s.Warn(cmd.ErrOrStderr(), nil)
			now := time.Now()
			var err error
			if f.Since, err = ops.ParseReplayTime("--since", since, now); err != nil {
				return err
			}
			if f.Until, err = ops.ParseReplayTime("--until", until, now); err != nil {
				return err
			}
			if rate < 0 {
				return fmt.Errorf("--rate must be 0 (no limit) or positive, got %v", rate)
			}
			if s.Relay.DatabaseURL == "" {
				return fmt.Errorf("database url is required (--database-url or WALRELAY_DATABASE_URL)")
			}
			if err := ops.CheckReplay(s.Relay, f, now); err != nil {
				return runtimeError{err}
			}
			if !dryRun && !ignorePause {
				if err := refuseWhilePaused(cmd.Context(), s, cmd.ErrOrStderr(), now); err != nil {
					return err
				}
			}
			logger, err := s.Logger()
			if err != nil {
				return err
			}
			pool, err := ops.OpenPool(cmd.Context(), s.Relay)
			if err != nil {
				return err
			}
			defer pool.Close()
			opts := ops.ReplayOptions{Filter: f, ID: ops.NewReplayID(), DryRun: dryRun, Rate: rate}
			cfg := s.Relay
			if !dryRun {
				if err := s.Sinks.Validate(); err != nil {
					return err
				}
				open, err := sinks.Open(cmd.Context(), s.Sinks, sinks.Window{Events: cfg.MaxInFlightEvents, Bytes: cfg.MaxInFlightBytes,
					PollBatch: cfg.PollInFlight()}, logger, cfg.ReconnectMin, cfg.ReconnectMax)
				if err != nil {
					return runtimeError{err}
				}
				defer open.Close()
				cfg.Sink = open
			}
			progress := newProgressPrinter(cmd.ErrOrStderr())
			opts.OnProgress, opts.ProgressInterval = progress.print, progress.every
			pr, err := ops.Replay(cmd.Context(), pool, cfg.Sink, cfg, opts)
			out := cmd.OutOrStdout()
			if dryRun {
				fmt.Fprintf(out, "would replay %d event(s)\n", pr.Total)
			} else {
				fmt.Fprintf(out, "replayed %d event(s) of %d (replay %s: header %s)\n", pr.Sent, pr.Total, pr.ID, ops.ReplayHeader)
			}
			if err != nil {
				return runtimeError{err}
			}
			return nil
		},
	}
	// Every setting run takes, and where to ask the relay whether it is paused.
	names := append([]string{"admin-url"}, s.DefaultNames()...)
	s.Register(cmd.Flags(), names...)
	fl := cmd.Flags()
	fl.StringVar(&since, "since", "", "replay rows created at or after this time (RFC 3339, or a duration before now)")
	fl.StringVar(&until, "until", "", "replay rows created before this time (RFC 3339, or a duration before now)")
	fl.StringVar(&f.AggregateType, "aggregate-type", "", "replay only this aggregate type")
	fl.StringVar(&f.AggregateID, "aggregate-id", "", "replay only this aggregate id")
	fl.StringVar(&f.EventType, "event-type", "", "replay only this event type")
	fl.StringSliceVar(&f.IDs, "id", nil, "replay only these event ids (repeat or comma-separate)")
	fl.BoolVar(&dryRun, "dry-run", false, "count the events a replay would publish, and publish nothing")
	fl.Float64Var(&rate, "rate", 0, "publish at most this many events per second (0: no limit)")
	fl.BoolVar(&ignorePause, "ignore-pause", false, "replay even while the relay at --admin-url (else --metrics-addr) is paused, without asking it")
	return cmd
}

// progressPrinter shows a replay's progress: a bar redrawn in place on a terminal,
// a line every few seconds otherwise.
type progressPrinter struct {
	w        io.Writer
	terminal bool
	every    time.Duration
}

func newProgressPrinter(w io.Writer) *progressPrinter {
	p := &progressPrinter{w: w, every: 5 * time.Second}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.terminal, p.every = true, 200*time.Millisecond
		}
	}
	return p
}

func (p *progressPrinter) print(pr ops.ReplayProgress) {
	if pr.DryRun {
		return
	}
	done := pr.Sent + pr.Failed + pr.Skipped
	percent := 100.0
	if pr.Total > 0 {
		percent = min(100, 100*float64(done)/float64(pr.Total))
	}
	eta := pr.ETA
	if eta == "" {
		eta = "-"
	}
	if !p.terminal {
		fmt.Fprintf(p.w, "replay %s: %d of %d events (%.0f%%), %d failed, %.0f/s, eta %s\n",
			pr.ID, done, pr.Total, percent, pr.Failed, pr.Rate, eta)
		return
	}
	const width = 30
	filled := int(percent / 100 * width)
	fmt.Fprintf(p.w, "\r[%s%s] %5.1f%% %d/%d %.0f/s eta %s   ", strings.Repeat("#", filled), strings.Repeat(".", width-filled),
		percent, done, pr.Total, pr.Rate, eta)
	if pr.Done {
		fmt.Fprintln(p.w)
	}
}
