package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/backoff"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
)

// NotifyChannel is the LISTEN/NOTIFY channel `walrelay migrate --notify` signals.
const NotifyChannel = "outbox_event"

// Config of a poller.
type Config struct {
	// Shape is the outbox table's (catalog.DescribeTable).
	Shape catalog.Shape
	// TopicTemplate, when set, is the table's own topic template, which its events
	// carry (outbox.Event.TopicTemplate). Table, when set, names the table on its
	// events (outbox.Event.Table), for a relay that streams several.
	TopicTemplate, Table string
	// Topic, when set, gives each event's topic template instead of TopicTemplate
	// (a topic routed by regular expression).
	Topic func(*outbox.Event) string
	// PollOnly makes the poller the relay: it publishes every pending row. Otherwise
	// it only retries rows the stream handed over (retry_after set).
	PollOnly  bool
	OnPublish OnPublish
	Policy    Policy
	// BatchSize rows are locked and published per transaction.
	BatchSize int
	// Workers is how many batches Run keeps under way at once, each in a transaction
	// of its own (0 or 1: one). While one batch waits for its acks, the next is
	// selected and published: SKIP LOCKED keeps them apart, and the earlier-row check
	// keeps an aggregate's later rows back while an earlier one is in another batch.
	Workers int
	// Interval is the fallback poll interval; NOTIFY wakes a poll-only poller sooner.
	Interval time.Duration
	// IdleMax, when longer than Interval, lets the wait double after each poll that
	// found nothing, up to IdleMax; Wake and a poll that found work bring it back to
	// Interval. For the stream's slow path, whose rows come only through Wake's
	// caller, so that an idle relay does not poll every Interval.
	IdleMax time.Duration
	// OnDeadLetter, when set, is told of each row that became a dead letter, once
	// that committed (after it was logged at ERROR).
	OnDeadLetter func(DeadLettered)
	// PublishTimeout bounds the wait for a batch's acks.
	PublishTimeout time.Duration
	Logger         *slog.Logger
	// OnBatch is called after each committed poll, OnError after a failed one.
	OnBatch func(BatchResult)
	OnError func(error)
	// Paused, when set and true, holds polling: a paused relay publishes nothing.
	// Checked before each poll, so a pause takes effect within Interval.
	Paused func() bool
}

// Poller publishes rows selected with FOR UPDATE SKIP LOCKED. Several pollers, in one
// process or many, never publish the same row within one attempt: a row stays locked
// from selection until its outcome is committed.
type Poller struct {
	cfg   Config
	pool  *pgxpool.Pool
	sink  sink.Sink
	store *Store
	query string
	wakes []chan struct{} // one per worker
	// lastBatch is how many rows the last poll read: the next one's room, so that a
	// backlog's batches are not grown by copying and an idle poll's stay small.
	lastBatch atomic.Int64
}

// BatchResult is what one poll did.
type BatchResult struct {
	Published, Deferred int
	FailedEventTypes    []string // one per failed attempt
	Duration            time.Duration
	// Retry is when the rows this poll scheduled for a retry are due, counted from
	// the poll's start.
	Retry RetryWindow
}

// New returns a poller; it starts nothing.
func New(pool *pgxpool.Pool, snk sink.Sink, cfg Config) *Poller {
	store := NewStore(pool, cfg.Shape, cfg.Policy)
	wakes := make([]chan struct{}, max(cfg.Workers, 1))
	for i := range wakes {
		wakes[i] = make(chan struct{}, 1)
	}
	return &Poller{cfg: cfg, pool: pool, sink: snk, store: store, query: selectQuery(cfg.Shape, cfg.PollOnly), wakes: wakes}
}

// Wake makes every worker poll now, with its wait back at Interval: rows may be
// due soon (a hand-over was just recorded).
func (p *Poller) Wake() { wakeAll(p.wakes) }

// selectQuery locks due rows in created_at order, skipping rows other pollers hold,
// and keeps only those with no earlier due row of the same aggregate outside this
// batch: an earlier row held by another poller is being published right now, so
// later rows of its aggregate wait for the next poll. Per-aggregate order thus holds
// across any number of pollers. Rows backing off after a failure do not hold back
// their aggregate (a failed event leaves the order, as in stream mode).
//
// In poll-only mode a row is due only once its inserting transaction is older than
// every transaction still running: a newer row may have committed before an older,
// still open transaction that writes the same aggregate, and publishing it first
// would break commit order. The comparison is of how far back from the transaction's
// own xid (age's base) each xid lies, widened from age's 31 bits to walrelay_full_xid's
// window, [base − 2^32 + 2^20, base + 2^20), where xids above the base come out
// negative: it holds for rows of any age below 2^32 − 2^20 xids, not only within
// 2^31, and reads xmin with none of the four conversions to text per row that
// walrelay_full_xid spends. It stays one inequality, so that the planner's estimate
// of the due rows (a third) keeps the index scan.
//
// Without a created_at column, rows go in physical order (ctid), which is insertion
// order for rows appended and never updated.
//
// The earlier-row check is a LATERAL probe with LIMIT 1 rather than NOT EXISTS: the
// planner may turn NOT EXISTS into a hash anti join that reads every pending row,
// which it does for batches of a few hundred and more (hundreds of milliseconds per
// poll at 200,000 pending rows); the probe is one index look-up per candidate.
func selectQuery(shape catalog.Shape, pollOnly bool) string {
	c := columnsOf(shape)
	table := shape.Ident()
	due := func(alias string) string {
		d := alias + ".processed_at IS NULL AND " + alias + ".dead_lettered_at IS NULL"
		if !pollOnly {
			return d + " AND " + alias + ".retry_after IS NOT NULL AND " + alias + ".retry_after <= now()"
		}
		return d + " AND (" + alias + ".retry_after IS NULL OR " + alias + ".retry_after <= now())" +
			" AND " + xidDistance(alias+".xmin") + " > (SELECT age(xid(pg_snapshot_xmin(pg_current_snapshot()))))"
	}
	// The candidates keep the table's own column values under fixed names.
	created, earlier, order := "", "p.ctid < c.position", "c.position"
	if c.createdAt != "" {
		created = ", o." + c.createdAt + " AS created_at"
		earlier = "(p." + c.createdAt + ", p.ctid) < (c.created_at, c.position)"
		order = "c.created_at, c.position"
	}
	cand := columns{id: "id", aggType: "aggregate_type", aggID: "aggregate_id", eventType: "event_type",
		payload: "payload", shape: shape}
	if c.createdAt != "" {
		cand.createdAt = "created_at"
	}
	placed := ""
	for i, p := range c.placed {
		name := "placed_" + strconv.Itoa(i)
		placed += ", o." + p + " AS " + name
		cand.placed = append(cand.placed, name)
	}
	return `WITH candidates AS (
		SELECT o.` + c.id + ` AS id, o.` + c.aggType + ` AS aggregate_type, o.` + c.aggID + ` AS aggregate_id,
			` + c.eventTypeExpr("o.") + ` AS event_type, o.` + c.payload + ` AS payload` + created + placed + `, o.attempts, o.ctid AS position
		FROM ` + table + ` o WHERE ` + due("o") + `
		ORDER BY ` + c.order("o.") + `
		LIMIT $1
		FOR UPDATE SKIP LOCKED)
	SELECT ` + cand.selectList("c.") + `, c.attempts, c.position::text
	FROM candidates c
	LEFT JOIN LATERAL (
		SELECT true AS held FROM ` + table + ` p
		WHERE p.` + c.aggType + ` = c.aggregate_type AND p.` + c.aggID + ` = c.aggregate_id AND ` + due("p") + `
		  AND ` + earlier + `
		  AND p.` + c.id + ` NOT IN (SELECT id FROM candidates)
		LIMIT 1) earlier ON true
	WHERE earlier.held IS NULL
	ORDER BY ` + order
}

// xidDistance is how many xids before age's base (the transaction's own xid, or the
// next one when it has none) the xid xmin is, in walrelay_full_xid's window: from
// 2^32 − 2^20 before the base to 2^20 after it, those after negative; the special
// xids (frozen) come out 2^31 − 1 before.
func xidDistance(xmin string) string {
	return "((age(" + xmin + ")::bigint + " + strconv.Itoa(1<<32+1<<20-1) + ") % " + strconv.Itoa(1<<32) + " - " + strconv.Itoa(1<<20-1) + ")"
}

// Run polls until ctx ends with Workers loops, each running whole batches back to
// back while there is work, then waiting for a notification or the interval.
func (p *Poller) Run(ctx context.Context) error {
	wakes := p.wakes
	if p.cfg.PollOnly {
		go p.listen(ctx, wakes)
	}
	var wg sync.WaitGroup
	for _, wake := range wakes {
		wg.Add(1)
		go func() { defer wg.Done(); p.loop(ctx, wake, wakes) }()
	}
	wg.Wait()
	return nil
}

// loop is one worker of Run. A worker that settled rows wakes the others: rows it
// held may have kept their aggregates' later rows from them (a worker that found
// its candidates held back waits), and those are due now. A worker that scheduled
// retries waits no longer than until the first of them is due, then the last: a
// backoff shorter than Interval is kept.
func (p *Poller) loop(ctx context.Context, wake <-chan struct{}, all []chan struct{}) {
	retry := backoff.New(p.cfg.Interval, 30*time.Second)
	idle := p.cfg.Interval // the wait after a poll that found nothing (Config.IdleMax)
	var due retriesDue
	for {
		if p.cfg.Paused != nil && p.cfg.Paused() {
			if !sleepOrWake(ctx, p.cfg.Interval, wake) {
				return
			}
			continue
		}
		started := time.Now()
		res, err := p.Poll(ctx)
		if ctx.Err() != nil {
			return
		}
		due = due.after(started, res.Retry)
		if err != nil && p.cfg.OnError != nil {
			p.cfg.OnError(err)
		} else if err == nil && p.cfg.OnBatch != nil {
			p.cfg.OnBatch(res)
		}
		if err == nil && res.Published+len(res.FailedEventTypes) > 0 {
			wakeAll(all)
		}
		delay := p.cfg.Interval
		switch {
		case err != nil:
			delay = retry.Next()
			p.cfg.Logger.Error("poll failed; retrying", "err", err, "retry_in", delay.Round(time.Millisecond).String())
		case res.Published+len(res.FailedEventTypes) == p.cfg.BatchSize:
			continue // more is waiting
		case res.Published+len(res.FailedEventTypes)+res.Deferred == 0:
			retry.Reset()
			delay = idle
			idle = min(2*idle, max(p.cfg.IdleMax, p.cfg.Interval))
		default:
			retry.Reset()
			idle = p.cfg.Interval
		}
		if !due.next.IsZero() {
			delay = min(delay, max(time.Until(due.next), 0))
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-wake:
			idle = p.cfg.Interval
		case <-timer.C:
		}
		timer.Stop()
	}
}

// retriesDue is when a worker's scheduled retries are due: next, when it polls
// again, and last, when the last of them is (zero: none). The rows due between
// are the last wake's, which errs late by at most the spread of their backoffs.
type retriesDue struct{ next, last time.Time }

// after folds in a poll that began at started and scheduled the retries w. A poll
// that began once a due time had come saw those rows due. w counts from the poll's
// transaction's start, a moment before now: adding it to now errs late by the
// poll's length, never early.
func (r retriesDue) after(started time.Time, w RetryWindow) retriesDue {
	switch {
	case !r.last.IsZero() && !started.Before(r.last):
		r = retriesDue{}
	case !r.next.IsZero() && !started.Before(r.next):
		r.next = r.last
	}
	if w.Last > 0 {
		now := time.Now()
		if first := now.Add(w.First); r.next.IsZero() || first.Before(r.next) {
			r.next = first
		}
		if last := now.Add(w.Last); last.After(r.last) {
			r.last = last
		}
	}
	return r
}

// sleepOrWake waits d or until woken, and reports false when ctx ended.
func sleepOrWake(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-wake:
	case <-timer.C:
	}
	return true
}

// listen wakes every worker on each NOTIFY; without the trigger it simply never
// fires, and the interval does the work.
func (p *Poller) listen(ctx context.Context, wakes []chan struct{}) {
	for ctx.Err() == nil {
		conn, err := p.pool.Acquire(ctx)
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		_, err = conn.Exec(ctx, "LISTEN "+NotifyChannel)
		for err == nil {
			_, err = conn.Conn().WaitForNotification(ctx)
			if err == nil {
				wakeAll(wakes)
			}
		}
		conn.Release()
		if ctx.Err() == nil {
			p.cfg.Logger.Warn("listen for outbox notifications failed; polling on the interval meanwhile", "err", err)
			time.Sleep(time.Second)
		}
	}
}

// Poll runs one batch: lock due rows, publish them, record each outcome, commit.
func (p *Poller) Poll(ctx context.Context) (BatchResult, error) {
	started := time.Now()
	var res BatchResult
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return res, fmt.Errorf("begin poll: %w", err)
	}
	defer tx.Rollback(context.Background())

	batch, unpublishable, err := p.selectDue(ctx, tx)
	if err != nil {
		return res, err
	}
	if _, err := p.store.DeadLetter(ctx, tx, unpublishable); err != nil { // held rows: all found
		return res, err
	}
	for _, f := range unpublishable {
		p.cfg.Logger.Error("outbox row cannot become an event; dead-lettered", "event_id", f.Event.ID, "table", p.cfg.Table, "err", f.Err)
		res.FailedEventTypes = append(res.FailedEventTypes, "")
	}
	if len(batch) == 0 {
		if err := tx.Commit(ctx); err != nil {
			return res, err
		}
		p.countUnpublishable(unpublishable)
		return res, nil
	}
	errs, err := p.publish(ctx, batch)
	if err != nil {
		return res, err
	}

	var published, positions []string
	var failures []Failure
	var brokerErr error
	for i, b := range batch {
		switch err := errs[i]; {
		case err == nil:
			published, positions = append(published, b.ev.ID), append(positions, b.position)
		case sink.IsEventError(err):
			failures = append(failures, Failure{Event: &batch[i].ev, Err: err, Final: sink.IsFinal(err)})
			res.FailedEventTypes = append(res.FailedEventTypes, b.ev.EventType)
			p.cfg.Logger.Warn("publish failed; recorded for retry", "event_id", b.ev.ID, "event_type", b.ev.EventType,
				"aggregate_id", b.ev.AggregateID, "attempt", b.attempts+1, "lsn", "", "err", err)
		default:
			res.Deferred++ // the broker is down: not the event's fault, no attempt counted
			brokerErr = err
		}
	}
	if err := p.store.PublishedLocked(ctx, tx, p.cfg.OnPublish, published, positions); err != nil {
		return res, err
	}
	dead, retry, err := p.store.RecordFailures(ctx, tx, failures)
	if err != nil {
		return res, err
	}
	if err := tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("commit poll: %w", err)
	}
	for _, d := range dead {
		d.log(p.cfg.Logger)
		if p.cfg.OnDeadLetter != nil {
			p.cfg.OnDeadLetter(d)
		}
	}
	p.countUnpublishable(unpublishable)
	res.Published, res.Duration, res.Retry = len(published), time.Since(started), retry
	if brokerErr != nil {
		return res, fmt.Errorf("broker unavailable for %d events: %w", res.Deferred, brokerErr)
	}
	return res, nil
}

// countUnpublishable tells OnDeadLetter of the rows a committed poll dead-lettered
// because they cannot become events (logged when found).
func (p *Poller) countUnpublishable(rows []Failure) {
	if p.cfg.OnDeadLetter == nil {
		return
	}
	for _, f := range rows {
		p.cfg.OnDeadLetter(DeadLettered{Event: f.Event, Table: p.cfg.Table, Attempts: 1, Err: f.Err})
	}
}

// dueRow is a row the poll locked, with its attempts so far and its physical
// position (ctid), which stays the row's while the poll holds its lock.
type dueRow struct {
	ev       outbox.Event
	attempts int
	position string
}

// selectDue locks the due rows and splits off those that cannot become events.
func (p *Poller) selectDue(ctx context.Context, tx pgx.Tx) ([]dueRow, []Failure, error) {
	rows, err := tx.Query(ctx, p.query, p.cfg.BatchSize)
	if err != nil {
		return nil, nil, fmt.Errorf("select due rows: %w", err)
	}
	var unpublishable []Failure
	room := make([]dueRow, 0, min(p.lastBatch.Load(), int64(p.cfg.BatchSize)))
	all, err := pgx.AppendRows(room, rows, func(r pgx.CollectableRow) (dueRow, error) {
		var x dueRow
		ev, bad, err := ScanEvent(r, p.cfg.Shape, &x.attempts, &x.position)
		ev.TopicTemplate, ev.Table = p.cfg.TopicTemplate, p.cfg.Table
		if p.cfg.Topic != nil {
			ev.TopicTemplate = p.cfg.Topic(&ev)
		}
		ev.PayloadType = p.cfg.Shape.PayloadType
		x.ev = ev
		if bad != nil {
			unpublishable = append(unpublishable, Failure{Event: &outbox.Event{ID: ev.ID}, Err: bad,
				NullID: errors.Is(bad, ErrNullID), Position: x.position})
		}
		return x, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read due rows: %w", err)
	}
	p.lastBatch.Store(int64(len(all)))
	batch := all[:0]
	for _, x := range all {
		if !slices.ContainsFunc(unpublishable, func(f Failure) bool { return f.Position == x.position }) {
			batch = append(batch, x)
		}
	}
	return batch, unpublishable, nil
}

// publish hands the batch to the sink and waits for every verdict.
func (p *Poller) publish(ctx context.Context, batch []dueRow) ([]error, error) {
	errs := make([]error, len(batch))
	var wg sync.WaitGroup
	wg.Add(len(batch))
	for i := range batch {
		p.sink.Publish(&batch[i].ev, sink.DoneFunc(func(err error) {
			errs[i] = err
			wg.Done()
		}))
	}
	waitCtx, cancel := context.WithTimeout(ctx, p.cfg.PublishTimeout)
	defer cancel()
	if err := waitGroup(waitCtx, &wg); err != nil {
		// The rows stay locked until rollback; the acks that come late are lost
		// bookkeeping only: the rows will be published again.
		return nil, fmt.Errorf("wait for %d acks: %w", len(batch), err)
	}
	return errs, nil
}

// wakeAll wakes every worker at most once: a wake that comes while a worker polls
// waits for it.
func wakeAll(wakes []chan struct{}) {
	for _, wake := range wakes {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

func waitGroup(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return errors.New("timed out")
	}
}
