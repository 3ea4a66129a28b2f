package main

import (
	"fmt"
	"io"
	"math"
)

// writeByLoad prints what the relay costs at each load of the run, side by side:
// idle, each fixed rate of single-event transactions, and the backlog drain.
func writeByLoad(w io.Writer, r *results) {
	d := r.Drain
	if r.Idle == nil && len(r.Latency) == 0 && (d == nil || len(d.Rounds) == 0) {
		return
	}
	fmt.Fprintln(w, "### By load")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Relay CPU is its threads' run time over the step (schedstat, in nanoseconds); latency is the row's created_at to the "+
		"hand-over to the producer (the relay's share), and commit to consume in parentheses; RSS at the end of the step "+
		"(the drain: its peak). Per event, the relay's read and write system calls and its threads' context switches: "+
		"each is a wake-up cycle's share.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| load | events/s | relay CPU per event | p50 ms | p99 ms | p99.9 ms | reads / writes / switches per event | RSS |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|")
	if i := r.Idle; i != nil {
		fmt.Fprintf(w, "| idle, %gs with no writes | 0 | %.2f ms of CPU per second (%.0f ms in all) | | | | | %s |\n",
			i.Seconds, i.RelayCPUmsPerS, i.RelayCPUms, bytesIEC(i.RSSKiB<<10))
	}
	for _, l := range r.Latency {
		fmt.Fprintf(w, "| %s/s single-event transactions, %d connections | %s | %.1f µs | %s (%s) | %s (%s) | %s (%s) | %.2f / %.2f / %.2f | %s |\n",
			commas(l.TargetRate), r.Settings.Workers, commas(int(math.Round(l.AchievedRate))), l.RelayCPUMicrosPerEvent,
			ms(l.HandoverP50ms), ms(l.E2EP50ms), ms(l.HandoverP99ms), ms(l.E2EP99ms), ms(l.HandoverP999ms), ms(l.E2EP999ms),
			l.RelayWakeups.Reads, l.RelayWakeups.Writes, l.RelayWakeups.Switches, bytesIEC(l.RelayRSSKiB<<10))
	}
	if d != nil && len(d.Rounds) > 0 {
		fmt.Fprintf(w, "| backlog of %s events, %d per transaction (median of %d) | %s | %.1f µs | | | | | %s |\n",
			commas(d.Events), r.Settings.RowsPerTx, len(d.Rounds), commas(int(math.Round(d.RelayRate.Median))),
			d.CPUMicros.Median, bytesIEC(d.PeakRSSBytes))
	}
	fmt.Fprintln(w)
}
