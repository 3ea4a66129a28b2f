package main

import (
	"math"
	"testing"
	"time"
)

func TestPerSecond(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(ms int) int64 { return start.Add(time.Duration(ms) * time.Millisecond).UnixNano() }
	var samples []sample
	// Second 0: 100 events of 1 ms and two slow ones (12 and 30 ms); hand-over 0.5 ms
	// except one of 15 ms and one record without a created_at.
	for i := range 100 {
		samples = append(samples, sample{commitAt: at(i * 9), e2eMs: 1, handoverMs: 0.5})
	}
	samples = append(samples, sample{commitAt: at(950), e2eMs: 12, handoverMs: 15},
		sample{commitAt: at(999), e2eMs: 30, handoverMs: math.NaN()})
	// Nothing in second 1; second 2: one event.
	samples = append(samples, sample{commitAt: at(2500), e2eMs: 2, handoverMs: 1})

	got := perSecond(samples, start)
	if len(got) != 3 {
		t.Fatalf("got %d seconds, want 3: %+v", len(got), got)
	}
	s0 := got[0]
	if s0.Count != 102 || s0.Slow != 2 || s0.HandoverSlow != 1 || s0.Maxms != 30 || s0.HandoverMaxms != 15 {
		t.Errorf("second 0 = %+v, want 102 events, 2 slow, 1 slow hand-over, max 30, hand-over max 15", s0)
	}
	// Nearest rank: the 101st of 102 sorted values is the 12 ms one.
	if s0.P99ms != 12 {
		t.Errorf("second 0 p99 = %v, want 12", s0.P99ms)
	}
	if s1 := got[1]; s1.Count != 0 || !math.IsNaN(float64(s1.P99ms)) {
		t.Errorf("second 1 = %+v, want empty with no p99", s1)
	}
	if s2 := got[2]; s2.Second != 2 || s2.Count != 1 || s2.Maxms != 2 || s2.Slow != 0 {
		t.Errorf("second 2 = %+v, want one event of 2 ms", s2)
	}
}
