package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/drain"
)

// errClosed fails the records a closed sink still held.
var errClosed = errors.New("kafka sink is closed")

// feed hands records to a franz-go client without ever waiting for room in the
// client's buffer. franz-go's Produce blocks its caller while the buffer is full,
// and the relay calls Publish on the goroutine that reads the WAL and answers the
// server (docs/design.md invariant 4): a full buffer there, filled by a replay or
// the poller's retries through the same client while the broker is silent, would
// stop the status updates until the server ends the walsender.
//
// So the feed keeps its own budget of records and bytes, below franz-go's limits
// (clientOpts), and produces a record at once only when it fits the budget and
// nothing is held before it; otherwise it holds the record, in publish order,
// and a goroutine of its own produces the held records as acknowledgements make
// room. What is held is bounded by its callers: the relay's in-flight window, the
// poller's batch, a replay's window.
type feed struct {
	client     *kgo.Client
	promise    func(*kgo.Record, error)
	maxRecords int
	maxBytes   int64
	room       chan struct{} // 1-buffered: a promise made room, or the feed closed

	// mu guards the budget and the held records. Nothing calls franz-go or a
	// callback while holding it.
	mu struct {
		sync.Mutex
		records int           // produced and not yet through their promise
		bytes   int64         // their sizes (userSize)
		held    []*record     // waiting for room, oldest first
		feeding bool          // the feeding goroutine runs: Publish must queue behind it
		fed     chan struct{} // closed when that goroutine returned
		closed  bool
		pending drain.Count // held records and the one the feeder is producing
	}
}

func newFeed(client *kgo.Client, promise func(*kgo.Record, error), maxRecords int, maxBytes int64) *feed {
	return &feed{client: client, promise: promise, maxRecords: max(maxRecords, 1), maxBytes: max(maxBytes, 1),
		room: make(chan struct{}, 1)}
}

// bufferOpts are franz-go's buffer limits for a feed of maxRecords: one record
// above it, since franz-go counts a record out only after its promise returned,
// when the feed may already have produced another in its place; no byte limit, the
// feed keeps that one.
func bufferOpts(maxRecords int) []kgo.Opt {
	return []kgo.Opt{kgo.MaxBufferedRecords(max(maxRecords, 1) + 1)}
}

// userSize is what franz-go counts of a record against its byte limit.
func userSize(r *kgo.Record) int64 {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// fitsLocked reports whether a record of size fits the budget now. A record larger
// than the whole byte budget goes alone, once nothing else is buffered.
func (f *feed) fitsLocked(size int64) bool {
	if f.mu.records == 0 {
		return true
	}
	return f.mu.records < f.maxRecords && f.mu.bytes+size <= f.maxBytes
}

// produce hands r to the client now or holds it; it never blocks.
func (f *feed) produce(r *record) {
	r.size = userSize(&r.Record)
	f.mu.Lock()
	if f.mu.closed {
		f.mu.records++ // the promise counts it out
		f.mu.bytes += r.size
		f.mu.Unlock()
		go f.promise(&r.Record, errClosed) // done is not called from inside Publish
		return
	}
	if !f.mu.feeding && f.fitsLocked(r.size) {
		f.mu.records++
		f.mu.bytes += r.size
		f.mu.Unlock()
		// Within the budget, franz-go has room: this does not block.
		f.client.Produce(context.Background(), &r.Record, f.promise)
		return
	}
	f.mu.held = append(f.mu.held, r)
	f.mu.pending.Add(1)
	if !f.mu.feeding {
		f.mu.feeding = true
		f.mu.fed = make(chan struct{})
		go f.run(f.mu.fed)
	}
	f.mu.Unlock()
}

// release counts a record out of the budget once its promise ran.
func (f *feed) release(size int64) {
	f.mu.Lock()
	f.mu.records--
	f.mu.bytes -= size
	waiting := f.mu.feeding
	f.mu.Unlock()
	if waiting {
		f.signal()
	}
}

// signal wakes the feeding goroutine without blocking.
func (f *feed) signal() {
	select {
	case f.room <- struct{}{}:
	default:
	}
}

// run produces the held records in order as room is made, and ends when none is
// left. While it runs, Publish holds every record behind it, so that the order of
// one aggregate's records is kept.
func (f *feed) run(fed chan struct{}) {
	defer close(fed)
	for {
		f.mu.Lock()
		if len(f.mu.held) == 0 || f.mu.closed {
			f.mu.feeding = false
			f.mu.Unlock()
			return
		}
		r := f.mu.held[0]
		if !f.fitsLocked(r.size) {
			f.mu.Unlock()
			<-f.room
			continue
		}
		f.mu.held[0] = nil
		f.mu.held = f.mu.held[1:]
		f.mu.records++
		f.mu.bytes += r.size
		f.mu.Unlock()
		f.client.Produce(context.Background(), &r.Record, f.promise)
		f.mu.Lock()
		f.mu.pending.Add(-1)
		f.mu.Unlock()
	}
}

// waitHeld waits until every held record is in the client, or ctx ends.
func (f *feed) waitHeld(ctx context.Context) error {
	if left, err := f.mu.pending.Wait(ctx, &f.mu); err != nil {
		return fmt.Errorf("%d records still wait for room in the producer's buffer: %w", left, err)
	}
	return nil
}

// close fails the records still held, once the feeding goroutine returned, so
// that nothing is produced after the client closed; the client's own close fails
// the rest.
func (f *feed) close() {
	f.mu.Lock()
	f.mu.closed = true
	held := f.mu.held
	f.mu.held = nil
	f.mu.pending.Add(-len(held))
	fed := f.mu.fed
	f.mu.Unlock()
	if fed != nil {
		f.signal()
		<-fed
	}
	for _, r := range held {
		f.mu.Lock()
		f.mu.records++ // the promise counts it out
		f.mu.bytes += r.size
		f.mu.Unlock()
		f.promise(&r.Record, errClosed)
	}
}
