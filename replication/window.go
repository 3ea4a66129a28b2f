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
type Window struct {
	maxEvents int64
	maxBytes  int64

	events  atomic.Int64
	bytes   atomic.Int64
	waiting atomic.Bool
	room    chan struct{}
}

// NewWindow returns a window of at most maxEvents events and maxBytes bytes. One event
// larger than maxBytes still passes when the window is empty.
func NewWindow(maxEvents, maxBytes int64) *Window {
	return &Window{maxEvents: maxEvents, maxBytes: maxBytes, room: make(chan struct{}, 1)}
}

// Full reports whether the reader must wait before taking another event.
func (w *Window) Full() bool {
	n := w.events.Load()
	return n > 0 && (n >= w.maxEvents || w.bytes.Load() >= w.maxBytes)
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
