package procs

import "testing"

func TestPolicyRisesAtOnceAndFallsAfterCalm(t *testing.T) {
	a := adapter{policy: Policy{Up: 0.6, Down: 0.3, Calm: 3}}
	steps := []struct {
		share float64
		want  change
	}{
		{0.1, stay},
		{0.59, stay},
		{0.6, widen},   // one busy sample is enough to rise
		{1.5, stay},    // raised already
		{0.2, stay},    // calm 1
		{0.2, stay},    // calm 2
		{0.35, stay},   // above Down: the calm count starts again
		{0.1, stay},    // calm 1
		{0.1, stay},    // calm 2
		{0.29, narrow}, // calm 3
		{0.5, stay},    // between the thresholds on one processor: stays
		{0.65, widen},
	}
	for i, s := range steps {
		if got := a.observe(s.share); got != s.want {
			t.Fatalf("step %d: share %.2f gave %v, want %v", i, s.share, got, s.want)
		}
	}
}
