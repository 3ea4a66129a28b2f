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
)

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
	var lat *latencyResult
	for i := range r.Latency {
		if r.Latency[i].TargetRate == goalLatencyRate {
			lat = &r.Latency[i]
		}
	}
	if (d == nil || len(d.Rounds) == 0) && lat == nil {
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
	fmt.Fprintln(w)
}
