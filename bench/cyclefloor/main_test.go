//go:build linux

package main

import (
	"os"
	"testing"
	"time"
)

// TestMain lets the test binary play the peer, as the command does: runFloor starts
// its own executable with -peer.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "-peer" {
		main()
		return
	}
	os.Exit(m.Run())
}

// The floor must count the events the peer wrote in the measured second, under
// either way of waking, and spend some CPU on them: a floor that read nothing would
// report a cost of nothing.
func TestFloorCountsTheStream(t *testing.T) {
	const rate = 2000
	for _, how := range []string{"timer", "deadline"} {
		f, err := runFloor(how, rate, 650, 2*time.Millisecond, time.Second)
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		want := rate * f.elapsed.Seconds()
		if float64(f.events) < 0.9*want || float64(f.events) > 1.1*want {
			t.Errorf("%s: %d events in %v, want about %.0f", how, f.events, f.elapsed, want)
		}
		if f.cpu <= 0 || f.micros() <= 0 {
			t.Errorf("%s: CPU %v for %d events, want some", how, f.cpu, f.events)
		}
		t.Logf("%s: %.2f µs per event, %.3f switches per event", how, f.micros(), f.switchesPerEvent())
	}
	if _, err := runFloor("sometimes", rate, 650, 2*time.Millisecond, time.Second); err == nil {
		t.Error("-wake sometimes: no error")
	}
}
