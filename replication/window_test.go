package replication_test

import (
	"testing"

	"github.com/walrelay/walrelay/replication"
)

// A slow-started window admits its initial count, then one more event for every
// event that settles, and stops growing at its configured bound.
func TestWindowSlowStartGrowsWithSettledEvents(t *testing.T) {
	window := replication.NewWindow(10, 1<<20)
	window.SlowStart(4)
	w := replication.NewWatermark(window, 0)
	w.Begin()
	var held []*replication.Txn
	take := func() { held = append(held, w.Track(1)) }
	settle := func() { held[0].Done(1, nil); held = held[1:] }

	for range 4 {
		if window.Full() {
			t.Fatalf("full at %d events: the initial count is 4", len(held))
		}
		take()
	}
	if !window.Full() {
		t.Fatal("room for a 5th event before any settled")
	}
	settle() // 3 in flight, bound 5
	for range 2 {
		if window.Full() {
			t.Fatalf("full at %d events after one settled: the bound is 5", len(held))
		}
		take()
	}
	if !window.Full() {
		t.Fatalf("room at %d events after one settled: the bound is 5", len(held))
	}
	for range 5 { // bound 10: the configured one
		settle()
	}
	for len(held) < 10 {
		if window.Full() {
			t.Fatalf("full at %d events with the bound grown to 10", len(held))
		}
		take()
	}
	if !window.Full() {
		t.Fatal("room past the configured 10 events")
	}
	for len(held) > 0 { // settling more does not grow it past 10
		settle()
	}
	for range 10 {
		take()
	}
	if !window.Full() {
		t.Fatal("room past the configured 10 events after more settled")
	}
}

// Without SlowStart, and with a slow start larger than the window, the configured
// bound holds from the first event.
func TestWindowWithoutSlowStartAdmitsItsBound(t *testing.T) {
	for _, initial := range []int64{0, 50} {
		window := replication.NewWindow(10, 1<<20)
		if initial > 0 {
			window.SlowStart(initial)
		}
		w := replication.NewWatermark(window, 0)
		w.Begin()
		for i := range 10 {
			if window.Full() {
				t.Fatalf("slow start %d: full at %d events, bound 10", initial, i)
			}
			w.Track(1)
		}
		if !window.Full() {
			t.Fatalf("slow start %d: room past 10 events", initial)
		}
	}
}
