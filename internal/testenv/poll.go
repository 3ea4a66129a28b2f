package testenv

import (
	"testing"
	"time"
)

// Eventually checks cond every 20ms until it holds or timeout passes, and reports
// whether it held: the one way tests wait for something to happen.
func Eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
}

// WaitFor is Eventually that fails the test, naming what it waited for.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Eventually(timeout, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// ReturnsWithin runs fn and fails the test when it has not returned within d: for
// calls that must not block (sink.Sink.Publish), where only a call that never
// returns shows the fault.
func ReturnsWithin(t testing.TB, d time.Duration, what string, fn func()) {
	t.Helper()
	returned := make(chan struct{})
	go func() { fn(); close(returned) }()
	select {
	case <-returned:
	case <-time.After(d):
		t.Fatalf("%s did not return within %s", what, d)
	}
}
