package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The pgoutput scenario measures what pgoutput's options cost the walsender, the
// ceiling of one slot: pg_recvlogical drains one backlog from several slots created
// at the same position, one per set of options, in turn.

// pgoutputVariant is one set of pgoutput options.
type pgoutputVariant struct {
	Name    string   `json:"name"`
	Options []string `json:"options"`
}

// pgoutputVariants: walrelay's options (protocol 1, text), binary values (PostgreSQL
// 14+), and protocol 2 with and without them. Protocol 2 only adds the streaming of
// in-progress transactions, which needs the streaming option as well: without it a
// committed transaction is sent exactly as by protocol 1.
var pgoutputVariants = []pgoutputVariant{
	{"proto 1, text (walrelay)", []string{"proto_version=1"}},
	{"proto 1, binary", []string{"proto_version=1", "binary=true"}},
	{"proto 2, text", []string{"proto_version=2"}},
	{"proto 2, binary", []string{"proto_version=2", "binary=true"}},
}

// pgoutputResult is one variant's drains.
type pgoutputResult struct {
	pgoutputVariant
	Drains       []recvResult `json:"drains"`
	Rate         summary      `json:"events_per_sec"`
	WalsenderCPU summary      `json:"walsender_cpu_us_per_event"`
	PostgresCPU  summary      `json:"postgres_cpu_us_per_event"`
	ClientCPU    summary      `json:"client_cpu_us_per_event"`
	Error        string       `json:"error,omitempty"` // the server refused the options
}

// runPgoutput writes -pgoutput-events rows -repeats times and drains each batch once
// per variant, starting with a different variant each round.
func (e *env) runPgoutput(ctx context.Context) ([]pgoutputResult, error) {
	const db = "bench_pgoutput"
	url, err := e.createDatabase(ctx, db)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := e.dropDatabase(context.Background(), db); err != nil {
			progress("  %v", err)
		}
	}()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	// The migrations create walrelay's publication; older ones left it to the relay.
	if _, err := conn.Exec(ctx, `DO $$ BEGIN
		IF NOT EXISTS (SELECT FROM pg_publication WHERE pubname = 'walrelay') THEN
			CREATE PUBLICATION walrelay FOR TABLE outbox_events WITH (publish = 'insert');
		END IF; END $$`); err != nil {
		return nil, fmt.Errorf("create publication: %w", err)
	}
	out := make([]pgoutputResult, len(pgoutputVariants))
	for i, v := range pgoutputVariants {
		out[i].pgoutputVariant = v
	}
	n, seq := e.opts.pgoutputEvents, 0
	for round := 1; round <= e.opts.repeats; round++ {
		for i := range pgoutputVariants {
			if err := recreateSlot(ctx, conn, fmt.Sprintf("bench_pgoutput%d", i)); err != nil {
				return out, err
			}
		}
		progress("[pgoutput %d/%d] writing %d rows", round, e.opts.repeats, n)
		if err := e.insertBacklog(ctx, conn, n, seq); err != nil {
			return out, err
		}
		endLSN, _, err := currentLSN(ctx, conn)
		if err != nil {
			return out, err
		}
		if err := e.insertBacklog(ctx, conn, 1, seq+n); err != nil { // the sentinel, as in the drain
			return out, err
		}
		seq += n + 1
		for k := range pgoutputVariants {
			i := (k + round - 1) % len(pgoutputVariants)
			if out[i].Error != "" {
				continue
			}
			if err := quiesce(ctx, conn); err != nil {
				return out, err
			}
			v := pgoutputVariants[i]
			rec, err := e.drainRecvlogical(ctx, conn, db, fmt.Sprintf("bench_pgoutput%d", i), endLSN, n, v.Options)
			if err != nil {
				if strings.Contains(err.Error(), "exit status") {
					progress("[pgoutput] %s: refused: %v", v.Name, err)
					out[i].Error = err.Error()
					continue
				}
				return out, err
			}
			progress("[pgoutput %d/%d] %s: %s in %.2fs, walsender %.1f µs/event", round, e.opts.repeats, v.Name,
				rate(n, secs(rec.Seconds)), rec.Seconds, rec.WalsenderCPUSec/float64(n)*1e6)
			out[i].Drains = append(out[i].Drains, rec)
		}
	}
	for i := range out {
		var rates, ws, pg, cl []float64
		for _, d := range out[i].Drains {
			rates = append(rates, d.EventsPerSec)
			ws = append(ws, d.WalsenderCPUSec/float64(d.Events)*1e6)
			pg = append(pg, d.PostgresCPUSec/float64(d.Events)*1e6)
			cl = append(cl, d.ClientCPUSec/float64(d.Events)*1e6)
		}
		out[i].Rate, out[i].WalsenderCPU, out[i].PostgresCPU, out[i].ClientCPU = summarize(rates), summarize(ws), summarize(pg), summarize(cl)
	}
	for i := range pgoutputVariants {
		if err := dropSlot(ctx, conn, fmt.Sprintf("bench_pgoutput%d", i)); err != nil {
			return out, err
		}
	}
	return out, nil
}

func writePgoutput(w io.Writer, r *results) {
	fmt.Fprintf(w, "### pgoutput options: pg_recvlogical draining %s events, %d round(s)\n\n", commas(r.Settings.PgoutputEvents), r.Settings.Repeats)
	fmt.Fprintln(w, "Medians (min–max). PostgreSQL CPU is the whole server's during the drain: the walsender, with nothing else running.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| options | events/s | vs walrelay's options | walsender CPU µs/event | PostgreSQL CPU µs/event | pg_recvlogical CPU µs/event |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|")
	base := r.Pgoutput[0]
	span := func(s summary, f string) string {
		return fmt.Sprintf(f+" ("+f+"–"+f+")", s.Median, s.Min, s.Max)
	}
	for _, p := range r.Pgoutput {
		if p.Error != "" {
			fmt.Fprintf(w, "| %s | refused: %s |||||\n", strings.Join(p.Options, " "), firstLine(p.Error))
			continue
		}
		ratio := "-"
		if base.Rate.Median > 0 {
			ratio = fmt.Sprintf("%.2f", p.Rate.Median/base.Rate.Median)
		}
		fmt.Fprintf(w, "| %s | %s (%s–%s) | %s | %s | %s | %s |\n", strings.Join(p.Options, " "),
			commas(int(p.Rate.Median)), commas(int(p.Rate.Min)), commas(int(p.Rate.Max)), ratio,
			span(p.WalsenderCPU, "%.1f"), span(p.PostgresCPU, "%.1f"), span(p.ClientCPU, "%.1f"))
	}
	fmt.Fprintln(w)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
