package main

import (
	"fmt"
	"io"
	"math"
)

// The goals the benchmark is held to, on this machine, side by side in one run.
const (
	goalDrainRatio    = 0.95 // drain events/s over pg_recvlogical's, at least
	goalRelayWALShare = 0.20 // WAL the relay causes over the inserts' WAL, at most
	goalPostgresCPU   = 1.3  // PostgreSQL CPU per event over the pg_recvlogical drain's, at most
	goalLatencyRate   = 5000 // events/s of the latency goals
	goalP99ms         = 20
	goalP999ms        = 40

	// The cost goals at every rate (docs/performance.md): the relay's CPU when idle
	// and per event at moderate rates, the relay's share of the latency at those
	// rates, poll mode against the stream, and what an extra idle database adds.
	goalIdleMsPerSec       = 2.0
	goalHandoverP99ms      = 5
	goalHandoverP999ms     = 10
	goalPollRatio          = 0.5
	goalExtraDatabaseMsPer = 0.5
)

// goalCPUPerEvent is the relay CPU per event each moderate rate is held to, µs.
var goalCPUPerEvent = []struct {
	rate   int
	micros float64
}{{5000, 8}, {20000, 5}}

// goalRate reports whether rate has a goal of CPU per event.
func goalRate(rate int) bool {
	for _, g := range goalCPUPerEvent {
		if g.rate == rate {
			return true
		}
	}
	return false
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

// writeGoals prints the goals table: each goal, the figure measured and the figure
// it is compared with, from this run.
func writeGoals(w io.Writer, r *results) {
	d := r.Drain
	lat := latencyAt(r, goalLatencyRate)
	if (d == nil || len(d.Rounds) == 0) && lat == nil && r.Idle == nil && len(r.Modes) == 0 && len(r.Databases) == 0 {
		return
	}
	fmt.Fprintf(w, "### Goals (%s)\n\n", r.Settings.Relay)
	fmt.Fprintln(w, "| goal | walrelay | compared with | result |")
	fmt.Fprintln(w, "|---|--:|--:|---|")
	if d != nil && len(d.Rounds) > 0 {
		peer := ""
		if d.PeerRate != nil {
			peer = fmt.Sprintf("; peer %s events/s (%.2f)", commas(int(math.Round(d.PeerRate.Median))), d.PeerRatio.Median)
		}
		fmt.Fprintf(w, "| drain ≥ %.2f × pg_recvlogical (median of %d) | %s events/s | pg_recvlogical %s events/s%s | %.2f: %s |\n",
			goalDrainRatio, len(d.Rounds), commas(int(math.Round(d.RelayRate.Median))), commas(int(math.Round(d.RecvRate.Median))), peer,
			d.Ratio.Median, verdict(d.Ratio.Median >= goalDrainRatio))
		wa := d.Rounds[0].Relay.WAL
		fmt.Fprintf(w, "| relay's WAL ≤ %.0f%% of the inserts' (to %s after the last confirm; median) | %s (round 1) | inserts %s (round 1) | %s: %s |\n",
			goalRelayWALShare*100, walAfterConfirm, bytesIEC(wa.RelayBytes), bytesIEC(wa.InsertBytes),
			pct(d.RelayWALShare.Median), verdict(d.RelayWALShare.Median <= goalRelayWALShare))
		if wa.RemovalChecked {
			fmt.Fprintf(w, "| removal of old rows, on its own (round 1) | %s | inserts %s | %s of the inserts' WAL |\n",
				removalSentence(wa), bytesIEC(wa.InsertBytes), pct(float64(wa.RemovalBytes)/float64(max(wa.InsertBytes, 1))))
		} else {
			fmt.Fprintln(w, "| removal of old rows, on its own | none: this mode keeps published rows | | |")
		}
		peer = ""
		if d.PeerPostgresCPU != nil {
			peer = fmt.Sprintf("; peer drain %.1f µs", d.PeerPostgresCPU.Median)
		}
		fmt.Fprintf(w, "| PostgreSQL CPU per event ≤ %.1f × the pg_recvlogical drain's (median) | %.1f µs | pg_recvlogical drain %.1f µs%s | %.2f: %s |\n",
			goalPostgresCPU, d.PostgresCPU.Median, d.RecvPostgres.Median, peer, d.PostgresCPURatio.Median,
			verdict(d.PostgresCPURatio.Median <= goalPostgresCPU))
	}
	if lat != nil {
		worst, at := 0, 0
		for _, s := range lat.PerSecond {
			if s.Slow > worst {
				worst, at = s.Slow, s.Second
			}
		}
		fmt.Fprintf(w, "| p99 ≤ %d ms at %s/s, commit→consume (created→hand-over) | %s ms (%s) | | %s |\n", goalP99ms, commas(goalLatencyRate),
			ms(lat.E2EP99ms), ms(lat.HandoverP99ms), verdict(float64(lat.E2EP99ms) <= goalP99ms))
		fmt.Fprintf(w, "| p99.9 ≤ %d ms at %s/s, commit→consume (created→hand-over) | %s ms (%s) | | %s |\n", goalP999ms, commas(goalLatencyRate),
			ms(lat.E2EP999ms), ms(lat.HandoverP999ms), verdict(float64(lat.E2EP999ms) <= goalP999ms))
		fmt.Fprintf(w, "| events over 10 ms at %s/s (the worst second) | %s of %s (%s in second %d) | | |\n", commas(goalLatencyRate),
			commas(lat.E2ESlow), commas(lat.Consumed), commas(worst), at)
	}
	writeCostGoals(w, r)
	fmt.Fprintln(w)
}

// writeCostGoals prints the goals of cost at every rate, for the scenarios that ran.
func writeCostGoals(w io.Writer, r *results) {
	if i := r.Idle; i != nil {
		floor := ""
		if i.FloorCPUmsPerS > 0 {
			floor = fmt.Sprintf("a Go process that only wakes once a second, same seconds: %.2f ms/s", i.FloorCPUmsPerS)
		}
		fmt.Fprintf(w, "| idle: relay CPU ≤ %.0f ms a second, the slot still confirmed and /readyz 200 | %.2f ms/s; confirmed %s, ready %s | %s | %s |\n",
			goalIdleMsPerSec, i.RelayCPUmsPerS, yesNo(i.ConfirmedMoved), yesNo(i.Ready), floor,
			verdict(i.RelayCPUmsPerS <= goalIdleMsPerSec && i.ConfirmedMoved && i.Ready))
		writeConsoleGoal(w, i.Console)
	}
	for _, g := range goalCPUPerEvent {
		lat := latencyAt(r, g.rate)
		if lat == nil {
			continue
		}
		floor := ""
		if f := lat.Floor; f != nil && f.TimerMicros > 0 && f.DeadlineMicros > 0 {
			floor = fmt.Sprintf("; the wake-up cycle alone (cyclefloor): %.1f µs woken by a timer every 2 ms, %.1f µs by read batching", f.TimerMicros, f.DeadlineMicros)
		}
		fmt.Fprintf(w, "| relay CPU ≤ %g µs per event at %s/s | %.1f µs | %s events/s reached%s | %s |\n",
			g.micros, commas(g.rate), lat.RelayCPUMicrosPerEvent, commas(int(math.Round(lat.AchievedRate))), floor,
			verdict(lat.RelayCPUMicrosPerEvent <= g.micros))
		fmt.Fprintf(w, "| created→hand-over p99 ≤ %d ms and p99.9 ≤ %d ms at %s/s | %s / %s ms | | %s |\n",
			goalHandoverP99ms, goalHandoverP999ms, commas(g.rate), ms(lat.HandoverP99ms), ms(lat.HandoverP999ms),
			verdict(float64(lat.HandoverP99ms) <= goalHandoverP99ms && float64(lat.HandoverP999ms) <= goalHandoverP999ms))
	}
	var stream *modeResult
	for i := range r.Modes {
		if r.Modes[i].Default && r.Modes[i].Skipped == "" {
			stream = &r.Modes[i]
		}
	}
	for _, m := range r.Modes {
		if stream == nil || m.Mode != "poll" || m.Skipped != "" || stream.EventsPerSec == 0 {
			continue
		}
		ratio := m.EventsPerSec / stream.EventsPerSec
		fmt.Fprintf(w, "| poll drain, `--on-publish %s`, ≥ %.1f × the stream's default (same run) | %s events/s | stream `%s` %s events/s | %.2f: %s |\n",
			m.OnPublish, goalPollRatio, commas(int(math.Round(m.EventsPerSec))), stream.OnPublish,
			commas(int(math.Round(stream.EventsPerSec))), ratio, verdict(ratio >= goalPollRatio))
	}
	if n := len(r.Databases); n > 1 {
		first, last := r.Databases[0], r.Databases[n-1]
		extra := (last.RelayCPUmsPerS - first.RelayCPUmsPerS) / float64(last.Databases-first.Databases)
		fmt.Fprintf(w, "| each idle database past the first ≤ %.1f ms of CPU a second (%d in one process) | %.3f ms/s | %d: %.2f ms/s, %d: %.2f ms/s | %s |\n",
			goalExtraDatabaseMsPer, last.Databases, extra, first.Databases, first.RelayCPUmsPerS, last.Databases, last.RelayCPUmsPerS,
			verdict(extra <= goalExtraDatabaseMsPer))
	}
}

// latencyAt is the latency step at the target rate, or nil.
func latencyAt(r *results, rate int) *latencyResult {
	for i := range r.Latency {
		if r.Latency[i].TargetRate == rate {
			return &r.Latency[i]
		}
	}
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
