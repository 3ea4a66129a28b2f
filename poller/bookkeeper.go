package poller

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/drain"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
)

// Outcome is one streamed event's result: Err nil when the broker acked it, or the
// event error that hands it over. Bookkept is told once the bookkeeping committed
// (nil), or could not be done (the error; the event then stays unsettled and the
// stream delivers it again). The bookkeeper queues a full window of them when a
// backlog drains, so the fields are ordered to leave no padding (TestOutcomeSize).
type Outcome struct {
	Event *outbox.Event
	Err   error
	// Version is the unpublishable row as the catch-up pass read it; zero for a
	// streamed row.
	Version RowVersion
	LSN     pglogrepl.LSN // the commit LSN of the event's transaction, for logs
	// Bookkept is a sink.Done, so that the relay's per-event state can take both
	// verdicts, the broker's and the bookkeeping's, without a closure per event.
	Bookkept sink.Done

	firstMissed int64 // when the row was first not found, in Unix nanoseconds; 0: not yet

	// Xid is the top-level xid of the transaction that inserted the row, as the
	// stream names it, or with RowXid the row's xmin, as a catch-up pass on a standby
	// read it; 0 for a row read from its table on the server the bookkeeping writes
	// to, which is visible there already.
	Xid uint32
	// RowXid marks an Xid that is a row's xmin, which a subtransaction may have
	// written: its visibility is judged by a rule that holds for those too.
	RowXid bool
	// Unpublishable marks a row that can never become an event (the decoder could
	// not map it); it goes straight to the dead letters with Err as the reason.
	Unpublishable bool
	// NullID marks an unpublishable row whose id column is NULL: it is found by
	// Version when set, else as a row of the transaction Xid.
	NullID bool
	// Covered marks an event an earlier exactly-once session committed to Kafka, or
	// left out of it for the poller: its row is marked unless the poller has it.
	Covered bool

	visible bool // its transaction was seen finished before the last attempt
}

// A row the stream delivered may not be visible yet: logical decoding sends a
// transaction as soon as its commit record is in the WAL, a little before other
// sessions see its rows, and much later under synchronous replication while the
// commit waits for a standby. A statement that finds no row for an outcome has
// therefore proved nothing. The bookkeeper then asks whether the row's transaction
// is finished for a new snapshot (pg_visible_in_snapshot); only a statement that
// runs after that answer said yes, and still finds nothing, proves the row gone
// (deleted by the application), and only then does the outcome settle without its
// row written. Until then it stays queued, unsettled: the slot does not confirm past
// it (docs/design.md invariant 1).

// invisibleFor is how long a row may stay unfound before the bookkeeper warns.
const invisibleFor = time.Minute

// Bookkeeper records the outcomes of streamed events in the outbox table, in
// batches: acked rows per the --on-publish mode, failed ones as attempts for the
// poller. An event counts as settled only after its row's update committed, so a
// crash never leaves an acked row unmarked behind a confirmed LSN, nor a failed event
// unrecorded.
type Bookkeeper struct {
	stores []*Store
	// byTable finds an outcome's store by its event's table (outbox.Event.Table);
	// an event without one belongs to the first store.
	byTable map[string]int
	mode    OnPublish
	every   time.Duration
	log     *slog.Logger

	// OnFlush, when set, is called with the duration of each batch written.
	OnFlush func(time.Duration)
	// OnHandOver, when set, is called after a batch that handed events over to the
	// poller committed: they are the poller's to retry from then on.
	OnHandOver func()
	// OnDeadLetter, when set, is told of each row a failed attempt made a dead
	// letter, once that committed (after it was logged at ERROR).
	OnDeadLetter func(DeadLettered)
	// Lag, when set, delays what the bookkeeper sees (tests; nil otherwise).
	Lag Lag

	mu struct {
		sync.Mutex
		queue   []Outcome
		pending drain.Count // queued or being written
		wake    chan struct{}
	}
}

// NewBookkeeper batches outcomes for at most every before writing them.
func NewBookkeeper(store *Store, mode OnPublish, every time.Duration, log *slog.Logger) *Bookkeeper {
	return NewBookkeeperTables([]*Store{store}, mode, every, log)
}

// NewBookkeeperTables is NewBookkeeper for several outbox tables, one store each;
// an outcome goes to the store whose table its event names (outbox.Event.Table,
// schema.name as Shape.Qualified), or to the first when it names none. Each batch
// is written in one transaction across the tables.
func NewBookkeeperTables(stores []*Store, mode OnPublish, every time.Duration, log *slog.Logger) *Bookkeeper {
	b := &Bookkeeper{stores: stores, byTable: make(map[string]int, len(stores)), mode: mode, every: every, log: log}
	for i, s := range stores {
		b.byTable[s.qualified] = i
	}
	b.mu.wake = make(chan struct{}, 1)
	return b
}

// storeOf is the index of the store o belongs to, or -1 for a table it has none for.
func (b *Bookkeeper) storeOf(o *Outcome) int {
	if o.Event.Table == "" {
		return 0
	}
	if i, ok := b.byTable[o.Event.Table]; ok {
		return i
	}
	return -1
}

// part is a batch's outcomes for one table, and the rows its statements found.
type part struct {
	ids, covered            []string
	failures, unpublishable []Failure
	found, foundCovered     Found
	foundDead               []bool         // by unpublishable's index
	dead                    []DeadLettered // by failures, once committed
}

// missing reports whether o's row was not found: every outcome whose statement
// looks the row up (all but failed attempts, which are upserts, and acks with
// --on-publish none, which write nothing). dead is the index of an unpublishable
// row's dead letter in the part.
func (p *part) missing(o *Outcome, dead int, mode OnPublish) bool {
	switch {
	case o.Unpublishable:
		return !p.foundDead[dead]
	case mode == None:
		return false
	case o.Covered:
		return !p.foundCovered.Has(o.Event.ID)
	case o.Err == nil:
		return !p.found.Has(o.Event.ID)
	}
	return false
}

// Record queues an outcome. It never blocks: the relay's in-flight window bounds
// how many can be queued.
func (b *Bookkeeper) Record(o Outcome) {
	b.mu.Lock()
	b.mu.queue = append(b.mu.queue, o)
	b.mu.pending.Add(1)
	b.mu.Unlock()
	b.wake()
}

// wake tells a writer that outcomes are queued; one wake pending is enough.
func (b *Bookkeeper) wake() {
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

// write is one writer: woken by Record, it waits every for the batch to fill a
// little (one statement per interval, not per event), then writes it. With nothing
// queued it sleeps: Record's wake follows every outcome it queues, and a wake already
// pending when Record finds the channel full is taken after that outcome was queued,
// so no outcome waits for a wake that never comes.
func (b *Bookkeeper) write(ctx context.Context) {
	timer := time.NewTimer(b.every)
	timer.Stop()
	defer timer.Stop()
	var spare []Outcome // the last batch's slice, reused by the next one
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.mu.wake:
		}
		timer.Reset(b.every)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
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
	parts := make([]part, len(b.stores))
	var unknown []Outcome
	kept := batch[:0]
	var hidden []bool                    // by kept's index: left out of the batch by Lag
	deadAt := make([]int, 0, len(batch)) // by kept's index: where an unpublishable row is in its part
	for _, o := range batch {
		i := b.storeOf(&o)
		if i < 0 {
			unknown = append(unknown, o)
			continue
		}
		kept = append(kept, o)
		deadAt = append(deadAt, -1)
		if b.Lag != nil {
			hidden = append(hidden, b.Lag.Hidden(&o))
			if hidden[len(hidden)-1] {
				continue
			}
		}
		p := &parts[i]
		switch {
		case o.Covered:
			p.covered = append(p.covered, o.Event.ID)
		case o.Unpublishable:
			deadAt[len(deadAt)-1] = len(p.unpublishable)
			f := Failure{Event: o.Event, Err: o.Err, NullID: o.NullID, Version: o.Version, Later: o.visible}
			if !o.RowXid {
				f.Xid = o.Xid
			}
			p.unpublishable = append(p.unpublishable, f)
			b.log.Error("outbox row cannot become an event; dead-lettered", "event_id", o.Event.ID,
				"table", b.stores[i].qualified, "lsn", o.LSN.String(), "err", o.Err)
		case o.Err == nil:
			p.ids = append(p.ids, o.Event.ID)
		default:
			f := Failure{Event: o.Event, Err: o.Err, Final: sink.IsFinal(o.Err)}
			p.failures = append(p.failures, f)
			if !f.Final { // else dead-lettered with this attempt: its ERROR line says so once committed
				b.log.Warn("publish failed; handing the event to the poller", "event_id", o.Event.ID,
					"table", b.stores[i].qualified, "event_type", o.Event.EventType, "aggregate_id", o.Event.AggregateID,
					"attempt", 1, "lsn", o.LSN.String(), "err", o.Err)
			}
		}
	}
	for _, o := range unknown {
		// A relay's own mistake: the event names a table it does not keep books for.
		o.Bookkept.Done(fmt.Errorf("event %s names outbox table %q, which this relay does not stream; "+
			"it stays unsettled and is streamed again", o.Event.ID, o.Event.Table))
	}
	batch = kept
	started := time.Now()
	err := b.commit(ctx, parts)
	if err == nil && b.OnFlush != nil {
		b.OnFlush(time.Since(started))
	}
	if err == nil && b.OnHandOver != nil && slices.ContainsFunc(parts, func(p part) bool { return len(p.failures) > 0 }) {
		b.OnHandOver()
	}
	for i := range parts {
		if err != nil {
			break
		}
		for _, d := range parts[i].dead {
			d.log(b.log)
			if b.OnDeadLetter != nil {
				b.OnDeadLetter(d)
			}
		}
		for j, f := range parts[i].unpublishable { // logged when queued
			if b.OnDeadLetter != nil && parts[i].foundDead[j] {
				b.OnDeadLetter(DeadLettered{Event: f.Event, Table: b.stores[i].qualified, Attempts: 1, Err: f.Err})
			}
		}
	}
	var retry []Outcome
	for k, o := range batch {
		if err == nil && (hidden != nil && hidden[k] || parts[b.storeOf(&o)].missing(&o, deadAt[k], b.mode)) {
			if !o.visible {
				retry = append(retry, o)
				continue
			}
			b.log.Warn("row not found to record its outcome, though its transaction is visible; settling it "+
				"(deleted by the application?)", "event_id", o.Event.ID, "table", o.Event.Table, "lsn", o.LSN.String())
		}
		o.Bookkept.Done(err)
	}
	b.seeVisible(ctx, retry)
	n := len(batch) - len(retry) + len(unknown)
	clear(batch)
	b.mu.Lock()
	b.mu.queue = append(b.mu.queue, retry...)
	b.mu.pending.Add(-n)
	b.mu.Unlock()
	if len(retry) > 0 {
		b.wake() // the next batch tries them again
	}
	return batch[:0]
}

// visibleSQL returns those of the xids $1 (32 bits, as the stream or a row names
// them) whose transactions a new snapshot sees as finished, with $2 telling a row's
// xmin (true) from a top-level xid. Each is widened to the 64-bit xid within 2^31 of
// the snapshot's xmax: a transaction the stream just delivered is, and so is the
// xmin of a row the catch-up pass passes on (it passes on recent ones only). A
// top-level xid is finished when the snapshot
// sees it so (pg_visible_in_snapshot). A row's xmin may be a subtransaction's, which
// snapshots do not list: it is finished when it is below the snapshot's xmin (its
// top-level xid is older still, docs/design.md invariant 10), or when it committed
// (pg_xact_status follows a subtransaction to its top level) and no transaction at
// or below it that the snapshot lists as running has committed or aborted since: one
// that has could be its top level, still leaving the running set.
const visibleSQL = `WITH s AS (SELECT pg_current_snapshot() AS snap,
		pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin,
		pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xmax)
	SELECT x, row_xid FROM s, unnest($1::bigint[], $2::bool[]) AS u(x, row_xid),
		LATERAL (SELECT s.xmax + ((x - s.xmax) % 4294967296 + 6442450944) % 4294967296 - 2147483648 AS full) w
	WHERE CASE
		WHEN NOT row_xid THEN pg_visible_in_snapshot(w.full::text::xid8, s.snap)
		WHEN w.full < s.xmin THEN true
		WHEN w.full >= s.xmax THEN false
		ELSE pg_xact_status(w.full::text::xid8) <> 'in progress' AND NOT EXISTS (
			SELECT FROM pg_snapshot_xip(s.snap) AS running(xid)
			WHERE running.xid::text::bigint <= w.full AND pg_xact_status(running.xid) <> 'in progress')
	END`

// seeVisible marks the outcomes whose rows were not found and whose transactions are
// finished now, so that the next batch's statement, which runs after this answer,
// decides whether the row is gone. It warns about rows unfound for long.
func (b *Bookkeeper) seeVisible(ctx context.Context, unfound []Outcome) {
	var xids []int64
	var rowXids []bool
	for i := range unfound {
		o := &unfound[i]
		now := time.Now()
		if o.firstMissed == 0 {
			o.firstMissed = now.UnixNano()
		} else if since := time.Unix(0, o.firstMissed); now.Sub(since) > invisibleFor {
			b.log.Warn("row of a committed transaction still not visible to other sessions (waiting for a synchronous "+
				"standby?); its LSN is not confirmed until the row is written", "event_id", o.Event.ID, "table", o.Event.Table,
				"lsn", o.LSN.String(), "since", since.UTC().Format(time.RFC3339))
			o.firstMissed = now.UnixNano() // warn again after as long
		}
		if o.Xid == 0 {
			o.visible = true
		} else {
			xids, rowXids = append(xids, int64(o.Xid)), append(rowXids, o.RowXid)
		}
	}
	if len(xids) == 0 {
		return
	}
	type xid struct {
		X      int64
		RowXid bool
	}
	rows, err := b.stores[0].pool.Query(ctx, visibleSQL, xids, rowXids)
	var finished []xid
	if err == nil {
		finished, err = pgx.CollectRows(rows, pgx.RowToStructByPos[xid])
	}
	if err != nil {
		if ctx.Err() == nil {
			b.log.Warn("bookkeeping: cannot tell whether unfound rows are visible yet; trying again", "err", err)
		}
		return
	}
	for i := range unfound {
		if o := &unfound[i]; o.Xid != 0 && slices.Contains(finished, xid{int64(o.Xid), o.RowXid}) &&
			(b.Lag == nil || !b.Lag.Unfinished(o)) {
			o.visible = true
		}
	}
}

// commit records a batch in one transaction and sets, per table, the rows its
// statements found.
func (b *Bookkeeper) commit(ctx context.Context, parts []part) error {
	work := false
	for i := range parts {
		p := &parts[i]
		work = work || len(p.failures) > 0 || len(p.unpublishable) > 0 ||
			(b.mode != None && (len(p.ids) > 0 || len(p.covered) > 0))
	}
	if !work {
		return nil
	}
	tx, err := b.stores[0].pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	for i, store := range b.stores {
		p := &parts[i]
		if b.mode != None {
			if p.found, err = store.Published(ctx, tx, b.mode, p.ids); err != nil {
				return err
			}
			if p.foundCovered, err = store.PublishedEarlier(ctx, tx, b.mode, p.covered); err != nil {
				return err
			}
		}
		if p.dead, _, err = store.RecordFailures(ctx, tx, p.failures); err != nil {
			return err
		}
		if p.foundDead, err = store.DeadLetter(ctx, tx, p.unpublishable); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// Wait returns when every recorded outcome was written, or ctx ends.
func (b *Bookkeeper) Wait(ctx context.Context) error {
	_, err := b.mu.pending.Wait(ctx, &b.mu)
	return err
}
