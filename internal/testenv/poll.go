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
