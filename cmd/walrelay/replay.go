package main

import (
	"bufio"
	"errors"
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
	var since, until, idFile, failedFile string
	var dryRun, ignorePause bool
	var rate float64
	cmd := &cobra.Command{
		Use:   "replay [--since T] [--until T] [--aggregate-type X] [--aggregate-id X] [--event-type X] [--id ID ...]",
		Short: "Publish again events still in the outbox table, by time, aggregate, event type or id",
		Long: "replay publishes again the outbox rows that match every filter given, oldest first, through the sink\n" +
			"run uses and in its record format, with the same id header (consumers that deduplicate drop what they\n" +
			"have) and a walrelay_replay header naming the replay. It reads the table and writes nothing: the slot\n" +
			"and pending rows' bookkeeping stay as they are. It refuses up front with --on-publish delete, where the\n" +
			"rows are gone; a --since older than --retention replays from the oldest row still kept, and says which.\n" +
			"--since and --until take a time (RFC 3339, e.g. 2026-01-02T15:04:05Z) or a duration before now (e.g. 2h,\n" +
			"30d). It reports progress every 5 seconds, and a broker that acknowledges nothing within --ack-timeout;\n" +
			"at the end it names up to 20 failed event ids (all of them in --failed-ids FILE) and exits 1.\n" +
			"A paused relay publishes nothing, replays included: replay first asks the relay at --admin-url (else\n" +
			"its --metrics-addr, sending --admin-token) whether it is paused, and refuses while it is, unless\n" +
			"--ignore-pause; when it cannot reach the relay it says so and replays anyway.\n" +
			"It takes run's settings for the tables, the records and the sink (--config, WALRELAY_*, flags), and\n" +
			"none of the stream's (slot, publication, intervals, delivery).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := s.Load(cmd.Flags()); err != nil {
				return err
			}
			s.Warn(cmd.ErrOrStderr(), nil)
			s, err := oneDatabase(cmd, s)
			if err != nil {
				return err
			}
			now := time.Now()
			if f.Since, err = ops.ParseReplayTime("--since", since, now); err != nil {
				return err
			}
			if f.Until, err = ops.ParseReplayTime("--until", until, now); err != nil {
				return err
			}
			if idFile != "" {
				ids, err := readIDFile(idFile)
				if err != nil {
					return err
				}
				f.IDs = append(f.IDs, ids...)
			}
			if rate < 0 {
				return fmt.Errorf("--rate must be 0 (no limit) or positive, got %v", rate)
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
				if err := s.PrepareRecords(&cfg); err != nil {
					return err
				}
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
			if len(pr.FailedIDsAll) > 0 {
				if werr := reportFailedIDs(cmd.ErrOrStderr(), pr.FailedIDsAll, failedFile); werr != nil {
					return runtimeError{errors.Join(err, werr)}
				}
			}
			if err != nil {
				return runtimeError{err}
			}
			return nil
		},
	}
	s.Register(cmd.Flags(), replaySettings(s)...)
	databaseFlag(cmd, "replay from")
	groupedHelp(cmd)
	fl := cmd.Flags()
	fl.StringVar(&since, "since", "", "replay rows created at or after this time (RFC 3339, or a duration before now)")
	fl.StringVar(&until, "until", "", "replay rows created before this time (RFC 3339, or a duration before now)")
	fl.StringVar(&f.AggregateType, "aggregate-type", "", "replay only this aggregate type")
	fl.StringVar(&f.AggregateID, "aggregate-id", "", "replay only this aggregate id")
	fl.StringVar(&f.EventType, "event-type", "", "replay only this event type")
	fl.StringSliceVar(&f.IDs, "id", nil, "replay only these event ids (repeat or comma-separate)")
	fl.StringVar(&idFile, "id-file", "", "replay only the event ids in this file, one per line (added to --id)")
	fl.StringVar(&failedFile, "failed-ids", "", "write the ids of the events that failed to this file, one per line (--id-file reads it)")
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
	noted    bool // the replay's note was shown
}

// line prints a line of its own, below a bar being redrawn.
func (p *progressPrinter) line(s string) {
	if p.terminal {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintln(p.w, s)
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
	if pr.Note != "" && !p.noted {
		p.noted = true
		p.line("replay " + pr.ID + ": " + pr.Note)
	}
	if pr.DryRun {
		return
	}
	if pr.Stalled != "" {
		p.line("replay " + pr.ID + ": " + pr.Stalled)
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

// readIDFile reads event ids, one per line; blank lines are skipped.
func readIDFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--id-file: %w", err)
	}
	defer f.Close()
	var ids []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if id := strings.TrimSpace(sc.Text()); id != "" {
			ids = append(ids, id)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--id-file %s: %w", path, err)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("--id-file %s holds no event id", path)
	}
	return ids, nil
}

// reportFailedIDs names up to ops.MaxFailedIDs failed ids, writes them all to file
// when one is given, and says the command that replays them.
func reportFailedIDs(w io.Writer, ids []string, file string) error {
	shown := ids[:min(len(ids), ops.MaxFailedIDs)]
	fmt.Fprintf(w, "%d event(s) failed: %s", len(ids), strings.Join(shown, ", "))
	if len(shown) < len(ids) {
		fmt.Fprintf(w, ", and %d more", len(ids)-len(shown))
	}
	fmt.Fprintln(w)
	if file != "" {
		if err := os.WriteFile(file, []byte(strings.Join(ids, "\n")+"\n"), 0o644); err != nil {
			return fmt.Errorf("--failed-ids: %w", err)
		}
		fmt.Fprintf(w, "all %d in %s; replay them with: walrelay replay --id-file %s (and the settings of this run)\n", len(ids), file, file)
		return nil
	}
	if len(shown) == len(ids) {
		fmt.Fprintf(w, "replay them with: walrelay replay --id %s (and the settings of this run)\n", strings.Join(ids, ","))
		return nil
	}
	fmt.Fprintln(w, "to replay them all, run again with --failed-ids FILE, then walrelay replay --id-file FILE")
	return nil
}
