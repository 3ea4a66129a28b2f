package relay

import (
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/replication"
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
	s.add(t0, 100, 1, 10, 5, 1.5, 6, 7)
	s.add(t0.Add(2*time.Second), 120, 3, 20, 0, 0, 0, 0) // 20 events in 2s, 10 acks of 0.2s
	first := s.since(time.Time{})
	if len(first) != 2 || first[1].EventsPerSecond != 10 || first[1].AckLatencySeconds != 0.2 || first[0].EventsPerSecond != 0 ||
		first[0].LagBytes != 5 || first[0].LagSeconds != 1.5 || first[0].Pending != 6 || first[0].DeadLetters != 7 {
		t.Fatalf("samples = %+v", first)
	}
	s.add(t0.Add(4*time.Second), 120, 3, 20, 0, 0, 0, 0) // nothing acknowledged
	s.add(t0.Add(6*time.Second), 130, 3, 20, 0, 0, 0, 0)
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

// The lag in seconds is 0 while the relay is caught up, grows while an event it
// received waits for the broker, and is 0 again once the broker acknowledged it: in
// the sample the console reads and in walrelay_oldest_inflight_age_seconds alike.
func TestLagSeconds(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := &Relay{window: replication.NewWindow(100, 1<<20), acks: newAckClock(t0), samples: newSampleRing(time.Second)}
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg, r)
	if err != nil {
		t.Fatal(err)
	}
	r.metrics = m
	lag := func(now time.Time) float64 {
		r.sampleAt(now, 0)
		s, _ := r.LatestSample()
		return s.LagSeconds
	}
	if got := lag(t0.Add(5 * time.Second)); got != 0 {
		t.Fatalf("caught up: lag %gs, want 0", got)
	}
	r.acks.rotate(t0.Add(6 * time.Second))
	sent := r.acks.sent() // received at +6s, handed to the broker, not acknowledged
	for _, c := range []struct {
		at   time.Duration
		want float64
	}{{7 * time.Second, 1}, {9 * time.Second, 3}, {20 * time.Second, 14}} {
		if got := lag(t0.Add(c.at)); got != c.want {
			t.Errorf("event waiting since +6s, at +%s: lag %gs, want %g", c.at, got, c.want)
		}
	}
	if v := gathered(t, reg, "walrelay_oldest_inflight_age_seconds"); v <= 0 {
		t.Errorf("walrelay_oldest_inflight_age_seconds = %g while an event waits, want > 0", v)
	}
	r.acks.answered(sent, nil)
	if got := lag(t0.Add(21 * time.Second)); got != 0 {
		t.Errorf("acknowledged: lag %gs, want 0", got)
	}
	if v := gathered(t, reg, "walrelay_oldest_inflight_age_seconds"); v != 0 {
		t.Errorf("walrelay_oldest_inflight_age_seconds = %g once acknowledged, want 0", v)
	}
}

// gathered is the value of the unlabelled gauge name in reg.
func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// The ring's memory per database, as docs/performance.md states it: 360 samples
// (25,920 bytes) at the default 10 s stats interval, 3,600 (259,200) at most.
func TestSampleSize(t *testing.T) {
	if got := unsafe.Sizeof(Sample{}); got != sampleBytes {
		t.Errorf("a Sample is %d bytes, sampleBytes says %d: correct it and docs/performance.md's console note", got, sampleBytes)
	}
	if got := cap(newSampleRing(10*time.Second).mu.buf) * sampleBytes; got != 25_920 {
		t.Errorf("the ring at 10s holds %d bytes, want 25,920", got)
	}
}
