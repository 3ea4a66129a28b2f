package main

import (
	"strings"
	"testing"
)

// costGoalLine is the goals table's row that starts with prefix, or "".
func costGoalLine(table, prefix string) string {
	for _, l := range strings.Split(table, "\n") {
		if strings.HasPrefix(l, "| "+prefix) {
			return l
		}
	}
	return ""
}

func TestCostGoals(t *testing.T) {
	r := &results{
		Idle: &idleResult{RelayCPUmsPerS: 0.9, FloorCPUmsPerS: 0.4, ConfirmedMoved: true, Ready: true},
		Latency: []latencyResult{
			{TargetRate: 5000, AchievedRate: 5000, RelayCPUMicrosPerEvent: 16.8, HandoverP99ms: 2.7, HandoverP999ms: 4.1,
				Floor: &cycleFloor{TimerMicros: 4.46, DeadlineMicros: 8.22}},
			{TargetRate: 20000, AchievedRate: 19000, RelayCPUMicrosPerEvent: 4.5, HandoverP99ms: 4.9, HandoverP999ms: 12},
		},
		Modes: []modeResult{
			{Mode: "stream", OnPublish: "progress", Default: true, drainResult: drainResult{EventsPerSec: 100_000}},
			{Mode: "poll", OnPublish: "mark", drainResult: drainResult{EventsPerSec: 40_000}},
			{Mode: "poll", OnPublish: "delete", drainResult: drainResult{EventsPerSec: 55_000}},
			{Mode: "poll", OnPublish: "none", Skipped: "refused"},
		},
		Databases: []databasesResult{{Databases: 1, RelayCPUmsPerS: 1.0}, {Databases: 4, RelayCPUmsPerS: 1.6}, {Databases: 8, RelayCPUmsPerS: 2.4}},
	}
	var b strings.Builder
	writeGoals(&b, r)
	table := b.String()
	for _, c := range []struct{ prefix, want string }{
		{"idle:", "same seconds: 0.40 ms/s | met |"},
		{"relay CPU ≤ 8 µs per event at 5,000/s", "**not met**"},
		{"relay CPU ≤ 8 µs per event at 5,000/s", "(cyclefloor): 4.5 µs woken by a timer every 2 ms, 8.2 µs by read batching"},
		{"relay CPU ≤ 5 µs per event at 20,000/s", "| met |"},
		{"created→hand-over p99 ≤ 5 ms and p99.9 ≤ 10 ms at 5,000/s", "| met |"},
		{"created→hand-over p99 ≤ 5 ms and p99.9 ≤ 10 ms at 20,000/s", "**not met**"}, // p99.9 12 ms
		{"poll drain, `--on-publish mark`", "0.40: **not met**"},
		{"poll drain, `--on-publish delete`", "0.55: met"},
		{"each idle database past the first", "| 0.200 ms/s |"}, // (2.4 - 1.0) / 7
	} {
		line := costGoalLine(table, c.prefix)
		if !strings.Contains(line, c.want) {
			t.Errorf("goal %q: row %q, want it to contain %q\n%s", c.prefix, line, c.want, table)
		}
	}
	if costGoalLine(table, "poll drain, `--on-publish none`") != "" {
		t.Errorf("a skipped poll mode has a goal row:\n%s", table)
	}

	r.Idle.Ready = false
	b.Reset()
	writeGoals(&b, r)
	if line := costGoalLine(b.String(), "idle:"); !strings.Contains(line, "**not met**") {
		t.Errorf("idle with /readyz not 200: row %q, want not met", line)
	}
}
