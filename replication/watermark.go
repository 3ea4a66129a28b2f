package replication

import (
	"sync/atomic"

	"github.com/jackc/pglogrepl"
)

// Watermark computes the LSN that is safe to confirm to PostgreSQL (docs/design.md invariant 1).
//
// Transactions are tracked in commit order. A transaction is settled when its Commit
// was seen and each of its events was settled (acked by the broker, or handed over to
// the poller with its bookkeeping committed). The confirmable LSN is the end LSN of the
// newest transaction that is settled together with every earlier one. When nothing is
// open or unsettled, the server's last reported WAL position may be confirmed too, so
// an idle outbox does not pin WAL on a busy database.
//
// Begin, Track, Commit, Received, ServerPosition and Confirmable belong to the goroutine reading
// the stream; Txn.Done and Fail may be called from any goroutine and never block.
type Watermark struct {
	window *Window

	open      *Txn
	queue     []*Txn // committed, not yet known to be settled, in commit order
	confirmed pglogrepl.LSN
	server    pglogrepl.LSN
	// events is the end of the newest transaction with events that Confirmable
	// passed: what the confirmed LSN owes to events, not to idle server positions.
	events pglogrepl.LSN
	// read is the WAL position of the newest message received: how far the stream has
	// read, which a transaction still being relayed holds the confirmed LSN behind.
	read pglogrepl.LSN

	failure atomic.Pointer[error]
}

// Txn is one transaction's share of the watermark. Its events settle through it.
type Txn struct {
	wm        *Watermark
	end       pglogrepl.LSN
	committed bool // written and read by the stream goroutine only
	carries   bool // Track was called: the transaction has events (stream goroutine only)
	pending   atomic.Int64
}

// NewWatermark returns a watermark that starts at start (the slot's confirmed flush LSN)
// and takes its events from window.
func NewWatermark(window *Window, start pglogrepl.LSN) *Watermark {
	return &Watermark{window: window, confirmed: start, server: start}
}

// Begin opens the next transaction in commit order.
func (w *Watermark) Begin() { w.open = &Txn{wm: w} }

// Track counts one event of size bytes in the open transaction and returns the
// transaction, whose Done must be called exactly once for it.
func (w *Watermark) Track(size int) *Txn {
	w.open.pending.Add(1)
	w.open.carries = true
	w.window.take(size)
	return w.open
}

// Commit closes the open transaction; end is the LSN just past its commit record.
func (w *Watermark) Commit(end pglogrepl.LSN) {
	t := w.open
	w.open = nil
	if t == nil {
		return
	}
	t.end = end
	t.committed = true
	w.queue = append(w.queue, t)
}

// Received records the WAL position of a message the stream received.
func (w *Watermark) Received(pos pglogrepl.LSN) { w.read = max(w.read, pos) }

// Read returns the WAL position of the newest message received (0: none yet), for
// progress lines only: what is read is not yet relayed.
func (w *Watermark) Read() pglogrepl.LSN { return w.read }

// ServerPosition records a WAL position the server reported in a keepalive. Everything
// before it has been sent, so it is safe to confirm once all received work is settled.
func (w *Watermark) ServerPosition(pos pglogrepl.LSN) {
	if w.open == nil && pos > w.server {
		w.server = pos
	}
}

// Done reports the outcome of one event of the transaction. nil means settled: acked
// by the broker, or handed over with its bookkeeping committed. An error frees the
// event's room in the window but leaves the transaction unsettled, and ends the
// session through Fail.
func (t *Txn) Done(size int, err error) {
	if err != nil {
		t.wm.Fail(err)
	} else {
		t.pending.Add(-1)
	}
	t.wm.window.release(size)
}

// Fail records a failure that ends the replication session; the first one wins. The
// transaction of the failed event never settles, so its LSN is not confirmed.
func (w *Watermark) Fail(err error) { w.failure.CompareAndSwap(nil, &err) }

// Err returns the failure recorded by Fail, if any.
func (w *Watermark) Err() error {
	if p := w.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// Confirmable advances past settled transactions and returns the LSN safe to confirm.
func (w *Watermark) Confirmable() pglogrepl.LSN {
	n := 0
	for _, t := range w.queue {
		if t.pending.Load() != 0 {
			break
		}
		if t.end > w.confirmed {
			w.confirmed = t.end
		}
		if t.carries && t.end > w.events {
			w.events = t.end
		}
		n++
	}
	if n > 0 {
		clear(w.queue[:n])
		w.queue = w.queue[n:]
	}
	if len(w.queue) == 0 && w.open == nil && w.server > w.confirmed {
		w.confirmed = w.server
	}
	return w.confirmed
}

// EventsSettled returns the end LSN of the newest transaction with events that
// Confirmable has passed (0: none yet). A confirmation at or past it moved the slot
// for events; one that only follows the server's position did not.
func (w *Watermark) EventsSettled() pglogrepl.LSN { return w.events }

// Idle reports whether every tracked transaction is committed and settled.
func (w *Watermark) Idle() bool {
	w.Confirmable()
	return w.open == nil && len(w.queue) == 0
}
