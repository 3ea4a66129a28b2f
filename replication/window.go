package replication

import (
	"context"
	"sync/atomic"
	"time"
)

// Window bounds the events handed to the broker and not yet settled, by count and by
// bytes (docs/design.md invariant 4). It outlives replication sessions: events still in the
// broker client's buffers after a reconnect keep counting until they settle, so a
// flapping connection cannot pile up unbounded duplicates.
//
// Take is called by the one goroutine that reads the stream; Release by any goroutine
// (broker callbacks), and it never blocks.
//
// After SlowStart the count bound begins lower and grows by one event for every
// event that settles, so it doubles with each round trip to the broker until it
// reaches maxEvents, where it stays (docs/performance.md, "Memory").
type Window struct {
	maxEvents int64
	maxBytes  int64

	limit   atomic.Int64 // the count bound now: maxEvents, or lower while slow start lasts
	events  atomic.Int64
	bytes   atomic.Int64
	waiting atomic.Bool
	room    chan struct{}
}

// NewWindow returns a window of at most maxEvents events and maxBytes bytes. One event
// larger than maxBytes still passes when the window is empty.
func NewWindow(maxEvents, maxBytes int64) *Window {
	w := &Window{maxEvents: maxEvents, maxBytes: maxBytes, room: make(chan struct{}, 1)}
	w.limit.Store(maxEvents)
	return w
}

// SlowStart makes the window admit at most initial events (at least one, at most
// maxEvents) until events settle, each settled event raising the bound by one. A
// relay starting on a backlog reads far faster than a producer that is still loading
// its topics' metadata acknowledges: without it the whole window fills in the first
// milliseconds, before anything settles, and the heap's peak follows. Call it before
// the window is used.
func (w *Window) SlowStart(initial int64) {
	w.limit.Store(min(max(initial, 1), w.maxEvents))
}

// Full reports whether the reader must wait before taking another event.
func (w *Window) Full() bool {
	n := w.events.Load()
	return n > 0 && (n >= w.limit.Load() || w.bytes.Load() >= w.maxBytes)
}

// InFlight returns the number of events and bytes not yet settled.
func (w *Window) InFlight() (events, bytes int64) { return w.events.Load(), w.bytes.Load() }

func (w *Window) take(size int) {
	w.events.Add(1)
	w.bytes.Add(int64(size))
}

func (w *Window) release(size int) {
	w.events.Add(-1)
	w.bytes.Add(-int64(size))
	if l := w.limit.Load(); l < w.maxEvents {
		w.limit.CompareAndSwap(l, l+1) // a lost race loses one step of growth, no more
	}
	if w.waiting.Load() {
		select {
		case w.room <- struct{}{}:
		default:
		}
	}
}

// Wait returns once an event settles and the window has room, when until passes,
// or when ctx ends, and reports whether there is room. The stream calls it while the
// window is Full, with until at its next status update.
func (w *Window) Wait(ctx context.Context, until time.Time) bool {
	if !w.Full() {
		return true
	}
	w.waiting.Store(true)
	defer w.waiting.Store(false)
	if !w.Full() { // a release between the check and the flag sent nothing
		return true
	}
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	for {
		select {
		case <-w.room:
			if !w.Full() {
				return true
			}
		case <-timer.C:
			return !w.Full()
		case <-ctx.Done():
			return !w.Full()
		}
	}
}
