package replication

import "sync/atomic"

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

// Room returns a channel that receives when an event settles, or nil when the
// window is not full. The caller selects on it together with its own deadlines.
func (w *Window) Room() <-chan struct{} {
	w.waiting.Store(true)
	if !w.Full() {
		w.waiting.Store(false)
		return nil
	}
	return w.room
}

// Wake ends a wait started by Room.
func (w *Window) Wake() { w.waiting.Store(false) }
