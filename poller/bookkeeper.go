package poller

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/drain"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
)

// Outcome is one streamed event's result: Err nil when the broker acked it, or the
// event error that hands it over. Bookkept is told once the bookkeeping committed
// (nil), or could not be done (the error; the event then stays unsettled and the
// stream delivers it again).
type Outcome struct {
	Event *outbox.Event
	Err   error
	// Unpublishable marks a row that can never become an event (the decoder could
	// not map it); it goes straight to the dead letters with Err as the reason.
	Unpublishable bool
	// Covered marks an event an earlier exactly-once session committed to Kafka, or
	// left out of it for the poller: its row is marked unless the poller has it.
	Covered bool
	LSN     pglogrepl.LSN // the commit LSN of the event's transaction, for logs
	// Bookkept is a sink.Done, so that the relay's per-event state can take both
	// verdicts, the broker's and the bookkeeping's, without a closure per event.
	Bookkept sink.Done

	firstMissed time.Time // when the row was first not found to mark
}

// invisibleFor bounds how long an acked row may stay unfound before the bookkeeper
// settles it anyway (the application may have deleted it), with a warning.
const invisibleFor = time.Minute

// Bookkeeper records the outcomes of streamed events in the outbox table, in
// batches: acked rows per the --on-publish mode, failed ones as attempts for the
// poller. An event counts as settled only after its row's update committed, so a
// crash never leaves an acked row unmarked behind a confirmed LSN, nor a failed event
// unrecorded.
type Bookkeeper struct {
	store *Store
	mode  OnPublish
	every time.Duration
	log   *slog.Logger

	// OnFlush, when set, is called with the duration of each batch written.
	OnFlush func(time.Duration)

	mu struct {
		sync.Mutex
		queue   []Outcome
		pending drain.Count // queued or being written
		wake    chan struct{}
	}
}

// NewBookkeeper batches outcomes for at most every before writing them.
func NewBookkeeper(store *Store, mode OnPublish, every time.Duration, log *slog.Logger) *Bookkeeper {
	b := &Bookkeeper{store: store, mode: mode, every: every, log: log}
	b.mu.wake = make(chan struct{}, 1)
	return b
}

// Record queues an outcome. It never blocks: the relay's in-flight window bounds
// how many can be queued.
func (b *Bookkeeper) Record(o Outcome) {
	b.mu.Lock()
	b.mu.queue = append(b.mu.queue, o)
	b.mu.pending.Add(1)
	b.mu.Unlock()
	select {
	case b.mu.wake <- struct{}{}:
	default:
	}
}

// writers is how many batches are written at once. Marking a drained backlog kept
// one PostgreSQL backend at 80% of a core while the walsender waited for the window
// to free up; a second batch in flight lets both cores work. Two batches never
// deadlock on marks: each locks its rows in index or heap order.
const writers = 2

// Run writes queued outcomes until ctx ends.
func (b *Bookkeeper) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() { b.write(ctx) })
	}
	wg.Wait()
	b.flush(context.Background(), nil) // settle what was acked before stopping
	return nil
}

// write is one writer: a batch per tick while outcomes are queued.
func (b *Bookkeeper) write(ctx context.Context) {
	ticker := time.NewTicker(b.every)
	defer ticker.Stop()
	var spare []Outcome // the last batch's slice, reused by the next one
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-b.mu.wake:
			// Wait for the batch to fill a little: one statement per tick, not per event.
			select {
			case <-ticker.C:
			case <-ctx.Done():
				return
			}
		}
		spare = b.flush(ctx, spare)
	}
}

// flush writes what is queued and returns its slice, emptied, for reuse.
func (b *Bookkeeper) flush(ctx context.Context, spare []Outcome) []Outcome {
	b.mu.Lock()
	batch := b.mu.queue
	b.mu.queue = spare[:0]
	b.mu.Unlock()
	if len(batch) == 0 {
		return batch
	}
	var ids, covered []string
	var failures, unpublishable []Failure
	for _, o := range batch {
		switch {
		case o.Covered:
			covered = append(covered, o.Event.ID)
		case o.Unpublishable:
			unpublishable = append(unpublishable, Failure{Event: o.Event, Err: o.Err})
			b.log.Error("outbox row cannot become an event; dead-lettered", "event_id", o.Event.ID,
				"lsn", o.LSN.String(), "err", o.Err)
		case o.Err == nil:
			ids = append(ids, o.Event.ID)
		default:
			failures = append(failures, Failure{Event: o.Event, Err: o.Err})
			b.log.Warn("publish failed; handing the event to the poller", "event_id", o.Event.ID,
				"event_type", o.Event.EventType, "aggregate_id", o.Event.AggregateID, "attempt", 1, "lsn", o.LSN.String(), "err", o.Err)
		}
	}
	started := time.Now()
	found, err := b.commit(ctx, ids, covered, failures, unpublishable)
	if err == nil && b.OnFlush != nil {
		b.OnFlush(time.Since(started))
	}
	var retry []Outcome
	for _, o := range batch {
		if err == nil && o.Err == nil && !o.Unpublishable && !o.Covered && b.mode != None && !found.Has(o.Event.ID) {
			// Acked, but its row is not visible yet: its transaction's commit is in the
			// WAL but not yet visible to other sessions. Mark it in a later batch; until
			// then it does not settle, so the slot does not confirm past it.
			if o.firstMissed.IsZero() {
				o.firstMissed = started
			}
			if time.Since(o.firstMissed) < invisibleFor {
				retry = append(retry, o)
				continue
			}
			b.log.Warn("acked row still not found to mark; settling it unmarked (deleted by the application?)",
				"event_id", o.Event.ID, "lsn", o.LSN.String())
		}
		o.Bookkept.Done(err)
	}
	n := len(batch) - len(retry)
	clear(batch)
	b.mu.Lock()
	b.mu.queue = append(b.mu.queue, retry...)
	b.mu.pending.Add(-n)
	b.mu.Unlock()
	return batch[:0]
}

// commit records a batch in one transaction and reports the acked ids it marked.
func (b *Bookkeeper) commit(ctx context.Context, ids, covered []string, failures, unpublishable []Failure) (Found, error) {
	if b.mode == None && len(failures) == 0 && len(unpublishable) == 0 {
		return Found{}, nil
	}
	tx, err := b.store.pool.Begin(ctx)
	if err != nil {
		return Found{}, err
	}
	defer tx.Rollback(context.Background())
	var found Found
	if b.mode != None {
		if found, err = b.store.Published(ctx, tx, b.mode, ids); err != nil {
			return Found{}, err
		}
		if err := b.store.PublishedEarlier(ctx, tx, b.mode, covered); err != nil {
			return Found{}, err
		}
	}
	if err := b.store.RecordFailures(ctx, tx, failures); err != nil {
		return Found{}, err
	}
	if err := b.store.DeadLetter(ctx, tx, unpublishable); err != nil {
		return Found{}, err
	}
	return found, tx.Commit(ctx)
}

// Wait returns when every recorded outcome was written, or ctx ends.
func (b *Bookkeeper) Wait(ctx context.Context) error {
	_, err := b.mu.pending.Wait(ctx, &b.mu)
	return err
}
