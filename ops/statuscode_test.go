package ops_test

import (
	"testing"

	"github.com/walrelay/walrelay/ops"
)

// status exits with the code of the most telling problem: the relay's own word, then
// no relay, then waiting rows, then the rest.
func TestStatusCode(t *testing.T) {
	p := func(checks ...ops.Check) []ops.Problem {
		var ps []ops.Problem
		for _, c := range checks {
			ps = append(ps, ops.Problem{Check: c})
		}
		return ps
	}
	for _, tc := range []struct {
		problems []ops.Problem
		want     int
	}{
		{nil, 0},
		{p(ops.CheckDeadLetters), 1},
		{p(ops.CheckPending, ops.CheckDeadLetters), 5},
		{p(ops.CheckPending, ops.CheckNotStreamed), 4},
		{p(ops.CheckNotStreamed, ops.CheckRelayNotReady, ops.CheckPending), 6},
		{p(ops.CheckDatabase), 3},
		{p(ops.Check("something new")), 1},
	} {
		if got := ops.StatusExitCode(tc.problems); got != tc.want {
			t.Errorf("StatusExitCode(%v) = %d, want %d", tc.problems, got, tc.want)
		}
	}
}
