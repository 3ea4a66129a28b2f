package relay

import (
	"testing"
	"time"
)

// The ring covers the last hour at the stats interval, within its bound, keeps
// the newest samples when it wraps, and derives rates from the counters' deltas.
func TestSampleRing(t *testing.T) {
	for _, c := range []struct {
		interval time.Duration
		want     int
	}{{10 * time.Second, 360}, {7 * time.Second, 515}, {time.Second, 3600}, {100 * time.Millisecond, 3600}, {2 * time.Hour, 1}, {0, 3600}} {
		if got := ringSize(c.interval); got != c.want {
			t.Errorf("ringSize(%s) = %d, want %d", c.interval, got, c.want)
		}
	}
	s := newSampleRing(20 * time.Minute) // 3 samples
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.add(t0, 100, 1, 10, 5, 6, 7)
	s.add(t0.Add(2*time.Second), 120, 3, 20, 0, 0, 0) // 20 events in 2s, 10 acks of 0.2s
	first := s.since(time.Time{})
	if len(first) != 2 || first[1].EventsPerSecond != 10 || first[1].AckLatencySeconds != 0.2 || first[0].EventsPerSecond != 0 ||
		first[0].LagBytes != 5 || first[0].Pending != 6 || first[0].DeadLetters != 7 {
		t.Fatalf("samples = %+v", first)
	}
	s.add(t0.Add(4*time.Second), 120, 3, 20, 0, 0, 0) // nothing acknowledged
	s.add(t0.Add(6*time.Second), 130, 3, 20, 0, 0, 0)
	all := s.since(time.Time{})
	if len(all) != 3 || !all[0].At.Equal(t0.Add(2*time.Second)) || all[1].AckLatencySeconds != 0 || all[2].EventsPerSecond != 5 {
		t.Fatalf("after wrapping, samples = %+v; want the newest 3", all)
	}
	if got := s.since(t0.Add(4 * time.Second)); len(got) != 1 || !got[0].At.Equal(t0.Add(6*time.Second)) {
		t.Errorf("since(+4s) = %+v, want the one sample after", got)
	}
	if l, ok := s.latest(); !ok || !l.At.Equal(t0.Add(6*time.Second)) {
		t.Errorf("latest = %+v, %v", l, ok)
	}
}
