package main

import (
	"testing"

	"github.com/walrelay/walrelay/relay"
)

// status exits with the code of the most telling problem: the relay's own word, then
// no relay, then waiting rows, then the rest.
func TestStatusCode(t *testing.T) {
	p := func(checks ...relay.Check) []relay.Problem {
		var ps []relay.Problem
		for _, c := range checks {
			ps = append(ps, relay.Problem{Check: c})
		}
		return ps
	}
	for _, tc := range []struct {
		problems []relay.Problem
		want     int
	}{
		{nil, 0},
		{p(relay.CheckDeadLetters), 1},
		{p(relay.CheckPending, relay.CheckDeadLetters), 5},
		{p(relay.CheckPending, relay.CheckNotStreamed), 4},
		{p(relay.CheckNotStreamed, relay.CheckRelayNotReady, relay.CheckPending), 6},
		{p(relay.CheckDatabase), 3},
		{p(relay.Check("something new")), 1},
	} {
		if got := relay.StatusExitCode(tc.problems); got != tc.want {
			t.Errorf("StatusExitCode(%v) = %d, want %d", tc.problems, got, tc.want)
		}
	}
}
