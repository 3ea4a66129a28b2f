package relay

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"go.opentelemetry.io/otel/trace"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/internal/drain"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// Settling is the one rule that can break docs/design.md invariant 1, so it lives
// here. An event is settled, and its transaction may be confirmed once all of its
// events and every earlier transaction's are, when nothing more has to happen for it:
//
//	outcome                                  none / progress       mark / delete
//	acked by the broker                      at the ack            when its row's mark committed
//	refused for what it is (event error)     when its failed attempt is recorded for the poller
//	a row the decoder cannot map             when its dead-letter record committed, on the
//	                                         row itself (the bookkeeping waits for its
//	                                         transaction: poller.Outcome)
//	broker or partition unavailable          never: the session ends and streams it again
//	exactly-once, its Kafka commit           at the commit         when the marks committed
//	exactly-once, covered by an earlier      at once               when marked (rows the poller
//	session's position                                             has are left alone)
//
// Txn.Done is where each of these ends; an error there ends the session instead,
// with the transaction unsettled.

// publisher hands events to the sink and their outcomes to the bookkeeping.
type publisher struct {
	sink     sink.Sink
	bk       *poller.Bookkeeper
	markAcks bool
	m        *metrics
	acks     *ackClock
	tracer   *eventTracer // nil: tracing off
	log      *slog.Logger
	// stores are the outbox tables' by name (outbox.Event.Table), for the rows of
	// table-less events (message.go).
	stores map[string]*poller.Store
	// inserts counts the dead-letter rows of table-less events being inserted.
	inserts struct {
		sync.Mutex
		n drain.Count
	}
}

// publisher is the stream's: with --on-publish progress its acked rows are covered
// by the published horizon, not marked (docs/design.md invariant 10).
func (r *Relay) publisher(snk sink.Sink, bk *poller.Bookkeeper) *publisher {
	marks := r.cfg.OnPublish != poller.None && r.cfg.OnPublish != poller.Progress
	return r.newPublisher(snk, bk, marks)
}

// passPublisher is a catch-up pass's: its rows are marked also with --on-publish
// progress, since no horizon of the new slot covers them until the pass is done.
func (r *Relay) passPublisher(snk sink.Sink, bk *poller.Bookkeeper) *publisher {
	if r.schemas != nil {
		snk = newResolvingSink(snk, r.schemas) // the stream's hold is not there (schemahold.go)
	}
	return r.newPublisher(snk, bk, r.cfg.OnPublish != poller.None)
}

func (r *Relay) newPublisher(snk sink.Sink, bk *poller.Bookkeeper, markAcks bool) *publisher {
	return &publisher{sink: snk, bk: bk, markAcks: markAcks, m: r.metrics, acks: r.acks, log: r.log, stores: r.stores,
		tracer: newEventTracer(r.cfg.TracerProvider, snk)}
}

// inflight is one event between the sink and its settlement: all the per-event state
// in one object, recycled once settled at the ack (inflights). It takes the sink's
// verdict (Done); as *bookkept, the bookkeeping's.
type inflight struct {
	ev   outbox.Event
	pub  *publisher
	txn  *replication.Txn
	size int
	at   rowAt
	span trace.Span // nil: tracing off
	sent *ackEpoch  // when it was handed to the sink (ackclock.go)
}

// rowAt is what settling an event needs of its position: all but its index among
// the transaction's rows, which only the exactly-once delivery reads, before it
// publishes. An inflight is held per event in flight, a full window of them at a
// drain's peak (docs/performance.md, "Memory: where the drain's resident set goes"),
// and this keeps it in the 320-byte size class.
type rowAt struct {
	lsn       pglogrepl.LSN
	committed time.Time
	xid       uint32
	rowXid    bool
}

func (at position) row() rowAt {
	return rowAt{lsn: at.lsn, committed: at.committed, xid: at.xid, rowXid: at.rowXid}
}

// position is at as a position, its index 0.
func (at rowAt) position() position {
	return position{lsn: at.lsn, committed: at.committed, xid: at.xid, rowXid: at.rowXid}
}

// inflights recycles the inflights of events settled at the ack (--on-publish
// progress or none): once Done settled one, nothing holds it, since the sink keeps
// the event only until it calls done (sink.Sink), so such an event costs no
// allocation of the relay's (docs/performance.md, "Moderate rates: the relay's
// per-transaction work").
var inflights = sync.Pool{New: func() any { return new(inflight) }}

// publish sends a copy of ev, an event of txn, to the sink.
func (p *publisher) publish(ev *outbox.Event, at position, txn *replication.Txn, size int) {
	f := inflights.Get().(*inflight)
	*f = inflight{ev: *ev, pub: p, txn: txn, size: size, at: at.row()}
	p.send(f, f)
}

// send starts f's span, when tracing is on, and hands its event to the sink, which
// tells done.
func (p *publisher) send(f *inflight, done sink.Done) {
	if p.tracer != nil {
		f.span = p.tracer.start(&f.ev, f.at.committed, byStream)
	}
	f.sent = p.acks.sent()
	p.sink.Publish(&f.ev, done)
}

// Done takes the sink's verdict.
func (f *inflight) Done(err error) {
	p := f.pub
	p.acks.answered(f.sent, err)
	if f.span != nil {
		finish(f.span, err)
	}
	if err == nil {
		p.m.published.Inc()
		if !f.at.committed.IsZero() {
			p.m.commitToAck.Observe(time.Since(f.at.committed).Seconds())
		}
	} else {
		p.m.failed.WithLabelValues(f.ev.EventType).Inc()
	}
	switch {
	case err == nil && !p.markAcks:
		f.txn.Done(f.size, nil)
		// Zeroed, as the sinks' pooled records are: the pool keeps it until the
		// collection after next, and its event's bytes would keep the decoder's slab
		// under them alive (TestSettledEventsKeepNoEventBytes).
		*f = inflight{}
		inflights.Put(f)
	case err == nil || sink.IsEventError(err):
		p.bk.Record(poller.Outcome{Event: &f.ev, Err: err, LSN: f.at.lsn, Xid: f.at.xid, RowXid: f.at.rowXid,
			Bookkept: (*bookkept)(f)})
	default:
		f.txn.Done(f.size, fmt.Errorf("publish event %s (event_type %s, aggregate_id %s): %w",
			f.ev.ID, f.ev.EventType, f.ev.AggregateID, err))
	}
}

// bookkept is an inflight whose Done takes the bookkeeping's verdict.
type bookkept inflight

// Done takes the outcome of the event's bookkeeping.
func (b *bookkept) Done(err error) {
	f := (*inflight)(b)
	if err != nil {
		err = fmt.Errorf("bookkeeping for event %s: %w", f.ev.ID, err)
	}
	f.txn.Done(f.size, err)
}

// deadLetter records a row the decoder could not map as a dead letter; it settles
// once that is committed.
func (p *publisher) deadLetter(row outbox.Event, reason error, at position, txn *replication.Txn) {
	p.deadLetterRead(row, reason, poller.RowVersion{}, at, txn)
}

// deadLetterRead is deadLetter for a row the catch-up pass read as version.
func (p *publisher) deadLetterRead(row outbox.Event, reason error, version poller.RowVersion, at position, txn *replication.Txn) {
	p.m.failed.WithLabelValues("").Inc()
	o := unmappable(row, reason, at)
	o.Version = version
	p.record(o, txn, 0, nil)
}

// unmappable is the outcome of a row that cannot become an event.
func unmappable(row outbox.Event, reason error, at position) poller.Outcome {
	var rowErr *decoder.RowError
	nullID := errors.As(reason, &rowErr) && rowErr.NullID || errors.Is(reason, poller.ErrNullID)
	return poller.Outcome{Event: &row, Err: reason, Unpublishable: true, NullID: nullID, LSN: at.lsn, Xid: at.xid,
		RowXid: at.rowXid}
}

// acked settles an event the broker has (o.Err nil): at once with --on-publish
// none, else once its row's bookkeeping committed.
func (p *publisher) acked(o poller.Outcome, txn *replication.Txn, size int) {
	if !p.markAcks {
		txn.Done(size, nil)
		return
	}
	p.record(o, txn, size, nil)
}

// record queues o for the bookkeeping and settles txn's event once it is written;
// then, when set, is told the result first.
func (p *publisher) record(o poller.Outcome, txn *replication.Txn, size int, then func(error)) {
	id := o.Event.ID
	o.Bookkept = sink.DoneFunc(func(err error) {
		if err != nil {
			err = fmt.Errorf("bookkeeping for event %s: %w", id, err)
		}
		if then != nil {
			then(err)
		}
		txn.Done(size, err)
	})
	p.bk.Record(o)
}
