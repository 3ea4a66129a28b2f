package poller

import (
	"testing"
	"time"
)

// A worker's wait for its retries: the first due, then the last, then none; a poll
// that began before a due time leaves it, and new retries widen the window.
func TestRetriesDue(t *testing.T) {
	before := time.Now()
	r := retriesDue{}.after(before, RetryWindow{First: time.Hour, Last: 2 * time.Hour})
	if d := r.next.Sub(before); d < time.Hour || d > time.Hour+time.Minute {
		t.Fatalf("next in %s, want the first retry's hour", d)
	}
	if got := r.after(before, RetryWindow{}); got != r {
		t.Fatalf("a poll begun before the first due time changed the wait: %+v, want %+v", got, r)
	}
	sooner := r.after(before, RetryWindow{First: time.Minute, Last: 3 * time.Hour})
	if sooner.next.Sub(before) > 2*time.Minute || sooner.last.Sub(before) < 3*time.Hour {
		t.Fatalf("new retries due sooner and later: next in %s, last in %s; want about 1m and 3h",
			sooner.next.Sub(before), sooner.last.Sub(before))
	}
	if got := r.after(r.next, RetryWindow{}); got.next != r.last || got.last != r.last {
		t.Fatalf("after the first due time: %+v, want next = last = %v", got, r.last)
	}
	if got := r.after(r.last, RetryWindow{}); !got.next.IsZero() || !got.last.IsZero() {
		t.Fatalf("after the last due time: %+v, want none", got)
	}
}
