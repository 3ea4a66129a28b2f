package relay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"go.opentelemetry.io/otel/trace"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/drain"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// Delivery is the stream's delivery guarantee towards Kafka.
type Delivery string

const (
	// AtLeastOnce: every event is published, some more than once after a crash.
	AtLeastOnce Delivery = "at-least-once"
	// ExactlyOnce: the stream's events are produced in Kafka transactions together
	// with the stream position, so read_committed consumers see each event once.
	ExactlyOnce Delivery = "exactly-once"
)

// exactlyOnce produces the stream's events in Kafka transactions. Each transaction
// ends with the position it reaches (commit LSN and event index within that database
// transaction, with the origin of that LSN) in the progress topic; a new session
// reads the position and skips the events before it, so a crash between the Kafka
// commit and the LSN confirmation repeats nothing. Events settle when their Kafka
// transaction commits.
//
// A position covers indexes, not events: the rows at indexes it covers that were not
// produced (handed over, dead-lettered) must have their bookkeeping committed before
// the Kafka transaction that covers them, and a later session must not mark them
// (docs/design.md invariant 2).
type exactlyOnce struct {
	tx       sink.StreamProducer
	origin   string        // of this replication session's LSNs, with its decoding (positionOrigin)
	done     sink.Position // committed by earlier sessions
	pub      *publisher    // bookkeeping: marks, dead letters, handovers
	handOver *sync.Map     // sink.EventKey -> error: events to give the poller, kept across sessions
	interval time.Duration
	maxBatch int

	reached sink.Position // what the open Kafka transaction will have committed
	batch   []eoPending
	started time.Time

	// A Kafka commit runs on a goroutine of its own, so that the stream goes on
	// reading and answering the server while the broker takes its time or is silent
	// (docs/design.md invariant 4). committing is non-nil while one runs and receives
	// its error; events decoded meanwhile are held, counted in the window, and
	// produced into the next transaction once it ended. stopCommit abandons it.
	committing <-chan error
	held       []eoPending
	heldSince  time.Time // when the first held event was held
	stopCommit context.CancelFunc

	// left counts hand-overs and dead letters not yet committed; the next Kafka
	// commit waits for them.
	left struct {
		sync.Mutex
		n   drain.Count
		err error
	}
}

type eoPending struct {
	ev      *outbox.Event
	txn     *replication.Txn
	size    int
	xid     uint32     // of its database transaction (poller.Outcome.Xid)
	rowless bool       // a table-less event: nothing to mark (message.go)
	span    trace.Span // nil: tracing off; it ends at the Kafka commit
	sent    *ackEpoch  // when it was produced; answered at the Kafka commit (ackclock.go)
}

func (p *exactlyOnce) event(decoded *outbox.Event, at position, txn *replication.Txn, size int) error {
	ev := *decoded // kept until the Kafka commit
	p.reached = sink.Position{LSN: at.lsn, Events: at.idx + 1, Origin: p.origin}
	if p.done.Covers(at.lsn, at.idx) {
		// Committed to Kafka by an earlier session, which may have died before its
		// bookkeeping, or handed over by it: mark it unless the poller has it.
		p.pub.acked(poller.Outcome{Event: &ev, Covered: true, Xid: at.xid}, txn, size)
		return nil
	}
	if reason, ok := p.handOver.LoadAndDelete(sink.KeyOf(&ev)); ok {
		// It poisoned an earlier Kafka transaction: record the failed attempt for
		// the poller (at least once from there) and leave it out.
		p.leaveOut(poller.Outcome{Event: &ev, Err: reason.(error), LSN: at.lsn, Xid: at.xid}, txn, size)
		return nil
	}
	return p.produce(eoPending{ev: &ev, txn: txn, size: size, xid: at.xid}, at)
}

// produce adds e's event to the open Kafka transaction, committing it once it holds
// maxBatch events; while a commit runs, e waits for it.
func (p *exactlyOnce) produce(e eoPending, at position) error {
	if p.pub.tracer != nil {
		e.span = p.pub.tracer.start(e.ev, at.committed, byStream)
	}
	e.sent = p.pub.acks.sent()
	if err := p.settleCommit(); err != nil {
		p.fail(e, err)
		return err
	}
	if p.committing != nil {
		if len(p.held) == 0 {
			p.heldSince = time.Now()
		}
		p.held = append(p.held, e)
		return nil
	}
	if err := p.add(e); err != nil {
		return err
	}
	if len(p.batch) >= p.maxBatch {
		p.commit()
	}
	return nil
}

// add produces e into the open Kafka transaction.
func (p *exactlyOnce) add(e eoPending) error {
	if err := p.tx.Produce(e.ev); err != nil {
		p.fail(e, err)
		return err
	}
	if len(p.batch) == 0 {
		p.started = time.Now()
	}
	p.batch = append(p.batch, e)
	return nil
}

// fail ends e unsettled: the session ends with err.
func (p *exactlyOnce) fail(e eoPending, err error) {
	p.pub.acks.answered(e.sent, err)
	if e.span != nil {
		finish(e.span, err)
	}
	e.txn.Done(e.size, err)
}

// refuse leaves out an event that is not produced (a schema the registry
// refused): its failed attempt goes to the poller's bookkeeping, a dead letter at
// once when err is final.
func (p *exactlyOnce) refuse(decoded *outbox.Event, err error, rowless bool, at position, txn *replication.Txn, size int) {
	ev := *decoded
	p.reached = sink.Position{LSN: at.lsn, Events: at.idx + 1, Origin: p.origin}
	if p.done.Covers(at.lsn, at.idx) { // left out before that commit
		txn.Done(size, nil)
		return
	}
	p.pub.m.failed.WithLabelValues(ev.EventType).Inc()
	if rowless {
		p.leaveOutWith(func(then func(error)) { p.pub.handOverMessage(&ev, err, at, txn, size, then) })
		return
	}
	p.leaveOut(poller.Outcome{Event: &ev, Err: err, LSN: at.lsn, Xid: at.xid}, txn, size)
}

func (p *exactlyOnce) unmappable(row outbox.Event, reason error, at position, txn *replication.Txn) {
	p.reached = sink.Position{LSN: at.lsn, Events: at.idx + 1, Origin: p.origin}
	if p.done.Covers(at.lsn, at.idx) { // dead-lettered before that commit
		txn.Done(0, nil)
		return
	}
	p.pub.m.failed.WithLabelValues("").Inc()
	p.leaveOut(unmappable(row, reason, at), txn, 0)
}

// commit starts ending the open Kafka transaction at the position reached, on a
// goroutine of its own: its events then get the --on-publish bookkeeping and settle
// like acked ones. After a failure they stay unsettled, and settleCommit ends the
// session.
func (p *exactlyOnce) commit() {
	if len(p.batch) == 0 || p.committing != nil {
		return
	}
	// Not the stream's context: a commit that was started must finish or fail;
	// stopCommit abandons it when the session ends before.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	batch, reached := p.batch, p.reached
	p.batch = nil
	res := make(chan error, 1)
	p.committing, p.stopCommit = res, cancel
	go func() {
		defer cancel()
		res <- p.commitBatch(ctx, batch, reached)
	}()
}

// commitBatch commits batch at reached and settles its events.
func (p *exactlyOnce) commitBatch(ctx context.Context, batch []eoPending, reached sink.Position) error {
	err := p.waitLeftOut(ctx)
	if err == nil {
		err = p.tx.Commit(ctx, reached)
	}
	for key, reason := range p.tx.Poisoned() {
		p.handOver.Store(key, reason) // the next replication session hands it over and commits the rest
	}
	for _, b := range batch {
		p.pub.acks.answered(b.sent, err)
		if b.span != nil {
			finish(b.span, err)
		}
		if err != nil {
			b.txn.Done(b.size, err)
			continue
		}
		p.pub.m.published.Inc()
		if b.rowless {
			b.txn.Done(b.size, nil)
			continue
		}
		p.pub.acked(poller.Outcome{Event: b.ev, Xid: b.xid}, b.txn, b.size)
	}
	return err
}

// settleCommit takes the outcome of a commit that ended, when one did; see committed.
func (p *exactlyOnce) settleCommit() error {
	if p.committing == nil {
		return nil
	}
	select {
	case err := <-p.committing:
		return p.committed(err)
	default:
		return nil
	}
}

// committed takes a commit's outcome and produces the events held meanwhile into a
// new transaction; the caller decides when that commits. An error is the commit's:
// the held events fail with it, and the session ends.
func (p *exactlyOnce) committed(err error) error {
	p.committing, p.stopCommit = nil, nil
	held := p.held
	p.held = nil
	if err != nil {
		for _, e := range held {
			p.fail(e, err)
		}
		return err
	}
	for i, e := range held {
		if err := p.add(e); err != nil {
			for _, e := range held[i+1:] {
				p.fail(e, err)
			}
			return err
		}
	}
	if len(held) > 0 && len(p.batch) == len(held) {
		p.started = p.heldSince // they waited for the commit: the interval counts from then
	}
	return nil
}

// stop abandons a running commit and waits for it, before the producer closes; the
// events it held or had not committed yet end unsettled.
func (p *exactlyOnce) stop() {
	if p.committing != nil {
		p.stopCommit()
		<-p.committing
		p.committing, p.stopCommit = nil, nil
	}
	for _, e := range append(p.held, p.batch...) {
		p.fail(e, errSessionEnded)
	}
	p.held, p.batch = nil, nil
}

// errSessionEnded ends the events of a Kafka transaction that was never committed.
var errSessionEnded = errors.New("the replication session ended before the kafka commit")

// leaveOut gives an event that is not produced to the poller (a failed attempt) or
// the dead letters, and counts it until that is committed.
func (p *exactlyOnce) leaveOut(o poller.Outcome, txn *replication.Txn, size int) {
	p.leaveOutWith(func(then func(error)) { p.pub.record(o, txn, size, then) })
}

// waitLeftOut waits until every event left out so far is committed to the poller
// or the dead letters: the position about to be committed covers their indexes.
func (p *exactlyOnce) waitLeftOut(ctx context.Context) error {
	if _, err := p.left.n.Wait(ctx, &p.left); err != nil {
		return fmt.Errorf("wait for hand-overs before the kafka commit: %w", err)
	}
	p.left.Lock()
	defer p.left.Unlock()
	return p.left.err
}

func (p *exactlyOnce) tick() error {
	if err := p.settleCommit(); err != nil {
		return err
	}
	if len(p.batch) >= p.maxBatch || len(p.batch) > 0 && time.Since(p.started) >= p.interval {
		p.commit()
	}
	return nil
}

// drain commits what is open and waits for the commits, then for the bookkeeping;
// ctx bounds the waits.
func (p *exactlyOnce) drain(ctx context.Context) error {
	for {
		p.commit()
		if p.committing == nil {
			break
		}
		select {
		case err := <-p.committing:
			if err := p.committed(err); err != nil {
				return err
			}
		case <-ctx.Done():
			return fmt.Errorf("wait for the kafka commit: %w", ctx.Err())
		}
	}
	if err := p.pub.bk.Wait(ctx); err != nil {
		return err
	}
	return p.pub.waitInserts(ctx)
}

// openExactlyOnce prepares a session's transactional producer: it fences earlier
// producers of the stream, then reads the position they committed and keeps it only
// when it comes from this stream's WAL history (docs/design.md invariant 8).
func (r *Relay) openExactlyOnce(ctx context.Context, rc *replication.Conn, slotCreated time.Time, pub *publisher) (*exactlyOnce, func(), error) {
	origin, serverPos, err := rc.Identify(ctx, r.cfg.Slot, slotCreated)
	if err != nil {
		return nil, nil, err
	}
	tx, pos, ok, err := r.cfg.Sink.(sink.Transactional).OpenStream(ctx, origin.Key())
	if err != nil {
		return nil, nil, err
	}
	if ok {
		if pos, err = r.checkPosition(ctx, rc, pos, origin, serverPos); err != nil {
			tx.Close()
			return nil, nil, err
		}
	}
	eo := &exactlyOnce{tx: tx, origin: positionOrigin(origin, r.decoding()), done: pos, pub: pub, handOver: &r.eoHandOver,
		interval: r.cfg.StatusInterval, maxBatch: max(1, r.cfg.MaxInFlightEvents/2)}
	return eo, func() { eo.stop(); tx.Close() }, nil
}

// checkPosition keeps a committed position only when it comes from this stream's WAL
// history and was counted by this configuration's decoding. A position from
// elsewhere is ignored, loudly: trusting it would skip events never produced;
// ignoring it repeats, at worst, what the slot had not confirmed.
func (r *Relay) checkPosition(ctx context.Context, rc *replication.Conn, pos sink.Position, origin catalog.Origin,
	serverPos pglogrepl.LSN) (sink.Position, error) {
	storedOrigin, decoding := splitPositionOrigin(pos.Origin)
	stored, err := catalog.ParseOrigin(storedOrigin)
	why := "an origin walrelay cannot read"
	if err == nil {
		var same bool
		if same, why, err = rc.Continues(ctx, stored, pos.LSN, origin, serverPos); err != nil {
			return sink.Position{}, err
		}
		if same && decoding == r.decoding() {
			r.log.Info("exactly-once: events up to this position are in the broker already", "slot", r.cfg.Slot, "position", pos.String())
			return pos, nil
		}
		if same {
			r.log.Warn("exactly-once: ignoring the stored position, which counts the events of a transaction as "+
				"another configuration decoded them (the tables: list or --messages-prefix changed since); events the "+
				"slot has not confirmed are produced again, so read_committed consumers may see some twice",
				"slot", r.cfg.Slot, "position", pos.String())
			return sink.Position{}, nil
		}
	}
	r.log.Error("exactly-once: ignoring the stored position, which comes from "+why+"; events the slot has not "+
		"confirmed are produced again, so read_committed consumers may see some twice",
		"slot", r.cfg.Slot, "position", pos.String(), "origin", origin.String())
	return sink.Position{}, nil
}

// A position counts a transaction's events by index, so it means what it says only
// to a relay that decodes the same events from the same WAL: the same tables, the
// same messages prefix. Its origin therefore carries a fingerprint of that decoding
// after the WAL history's origin.
const decodingField = " decoding="

// decoding fingerprints what makes an event of a transaction: the tables streamed
// (in any order) and the messages prefix.
func (r *Relay) decoding() string {
	names := r.tableNames()
	slices.Sort(names)
	sum := sha256.Sum256([]byte(strings.Join(names, "\n") + "\x00" + r.cfg.MessagePrefix))
	return hex.EncodeToString(sum[:8])
}

func positionOrigin(o catalog.Origin, decoding string) string {
	return o.String() + decodingField + decoding
}

// splitPositionOrigin splits what positionOrigin joined; a position written without
// its decoding has "" for it.
func splitPositionOrigin(s string) (origin, decoding string) {
	i := strings.LastIndex(s, decodingField)
	if i < 0 {
		return s, ""
	}
	return s[:i], s[i+len(decodingField):]
}

// checkSink checks what the configuration asks of its sink.
func (c *Config) checkSink() error {
	if c.Sink == nil {
		return errors.New("a sink is required: a broker client from sink/kafka, sink/nats, sink/rabbitmq or " +
			"sink/redis (package sinks builds one from a configuration), or a sink.Sink of your own")
	}
	if _, ok := c.Sink.(sink.Transactional); c.Delivery == ExactlyOnce && !ok {
		return errors.New("delivery exactly-once needs a sink with transactions (Kafka)")
	}
	return nil
}

func (c *Config) validateDelivery() error {
	switch c.Delivery {
	case AtLeastOnce:
		return nil
	case ExactlyOnce:
		if c.Mode != ModeStream {
			return errors.New("delivery exactly-once needs mode stream")
		}
		return nil
	}
	return fmt.Errorf("delivery %q: want at-least-once or exactly-once", c.Delivery)
}
