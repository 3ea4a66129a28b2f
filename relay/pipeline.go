package relay

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/replication"
)

// pipeline is the one path from the stream's pgoutput messages to the broker, for
// every delivery guarantee: it decodes each message, opens and commits transactions
// in the watermark, and hands each event (or unmappable row) to the delivery, which
// settles it (settle.go says what settled means).
type pipeline struct {
	dec *decoder.Decoder
	msg decoder.Message
	wm  *replication.Watermark
	d   delivery
	at  position // of the open transaction
	// tables are the decoder's, in its order (decoder.Message.Table). A table
	// without a created_at column takes its transaction's commit time instead.
	tables []table
	// onOutsideMessage is told of each non-transactional message with the events'
	// prefix (decoder.KindOutsideMessage), which is no event.
	onOutsideMessage func()
	// backlog follows the WAL written before the session started; nil once relayed.
	backlog *backlog
	// rows, when set, is told the xid of each transaction with outbox rows (the
	// published horizon's progress.rows).
	rows *rowXids
	// schemas, when set, resolves each event's schema ids before it is published
	// (schemahold.go).
	schemas *schemaHold
}

// position is where an event sits in the stream: its transaction's commit LSN and
// time, and its index among the transaction's outbox rows.
type position struct {
	lsn       pglogrepl.LSN
	committed time.Time // zero in the catch-up pass
	idx       int
	xid       uint32 // the transaction's, for rows not visible yet (poller.Outcome.Xid); 0 in the catch-up pass
	// rowXid: xid is the row's xmin, set by a catch-up pass on a standby
	// (poller.Outcome.RowXid).
	rowXid bool
}

// delivery takes the events of the stream's open transaction to the broker.
type delivery interface {
	// event publishes ev (or decides it needs no publishing) and settles it in txn.
	// ev is the decoder's: valid during the call only, so a delivery copies it.
	event(ev *outbox.Event, at position, txn *replication.Txn, size int) error
	// message publishes a table-less outbox event (message.go) and settles it in txn.
	message(ev outbox.Event, at position, txn *replication.Txn, size int) error
	// malformedMessage dead-letters a message with the events' prefix that is no
	// event, as row.
	malformedMessage(row outbox.Event, reason *decoder.MessageError, at position, txn *replication.Txn)
	// refuse records a failed attempt of ev, an event or (rowless) a table-less
	// event, that is not published: err is the event error it failed with (a
	// schema the registry refused). It settles as a sink's event error would.
	refuse(ev *outbox.Event, err error, rowless bool, at position, txn *replication.Txn, size int)
	// unmappable dead-letters a row the decoder could not turn into an event.
	// row names the row: its ID (unless reason says it is NULL) and Table.
	unmappable(row outbox.Event, reason error, at position, txn *replication.Txn)
	// tick runs every status interval.
	tick() error
	// drain waits until what was handed to the broker settled, or ctx ends.
	drain(ctx context.Context) error
}

func (p *pipeline) HandleWAL(ctx context.Context, data []byte) error {
	if err := p.dec.Decode(data, &p.msg); err != nil {
		var msgErr *decoder.MessageError
		if errors.As(err, &msgErr) {
			p.malformed(msgErr)
			return nil
		}
		var rowErr *decoder.RowError
		if errors.As(err, &rowErr) {
			p.noteRow()
			row := outbox.Event{ID: rowErr.ID}
			p.tables[p.msg.Table].label(&row)
			p.d.unmappable(row, rowErr, p.at, p.track(0))
			p.at.idx++
			return nil
		}
		return err
	}
	switch p.msg.Kind {
	case decoder.KindBegin:
		p.wm.Begin()
		p.at = position{lsn: p.msg.FinalLSN, committed: p.msg.CommitTime, xid: p.msg.Xid}
	case decoder.KindInsert:
		t := &p.tables[p.msg.Table]
		t.label(&p.msg.Event)
		if t.shape.Columns.CreatedAt == "" {
			p.msg.Event.CreatedAt = p.at.committed
		}
		verdict, err := p.checkSchemas(ctx)
		if err != nil {
			return err // held: nothing was done with the message
		}
		p.noteRow()
		size := p.msg.Event.Size()
		if verdict != nil {
			p.d.refuse(&p.msg.Event, verdict, false, p.at, p.track(size), size)
		} else {
			err = p.d.event(&p.msg.Event, p.at, p.track(size), size)
		}
		p.at.idx++
		return err
	case decoder.KindMessage:
		return p.message(ctx)
	case decoder.KindOutsideMessage:
		p.onOutsideMessage()
	case decoder.KindCommit:
		p.wm.Commit(p.msg.EndLSN)
	case decoder.KindHandedOver:
		p.noteRow()
	}
	// KindHandedOver: the poller's row (docs/design.md invariant 2), never streamed.
	return nil
}

// checkSchemas resolves the schema ids of the decoded event, when a converter
// uses a registry (schemahold.go).
func (p *pipeline) checkSchemas(ctx context.Context) (verdict, err error) {
	if p.schemas == nil {
		return nil, nil
	}
	return p.schemas.check(ctx, &p.msg.Event)
}

// noteRow tells rows that the open transaction has an outbox row.
func (p *pipeline) noteRow() {
	if p.rows != nil {
		p.rows.note(p.at.xid)
	}
}

// track tracks an event of the open transaction in the watermark, and counts it
// while the session relays the WAL written before its start.
func (p *pipeline) track(size int) *replication.Txn {
	if p.backlog != nil {
		p.backlog.events++
	}
	return p.wm.Track(size)
}

func (p *pipeline) Tick(context.Context) error {
	if p.backlog != nil && p.backlog.at(time.Now(), p.wm.Confirmable(), p.wm.Read()) {
		p.backlog = nil
	}
	return p.d.tick()
}

func (p *pipeline) Drain(ctx context.Context) error { return p.d.drain(ctx) }

// atLeastOnce publishes each event on its own; a crash repeats what was acked but
// not yet confirmed.
type atLeastOnce struct{ pub *publisher }

func (a atLeastOnce) event(ev *outbox.Event, at position, txn *replication.Txn, size int) error {
	a.pub.publish(ev, at, txn, size)
	return nil
}

func (a atLeastOnce) refuse(ev *outbox.Event, err error, tableless bool, at position, txn *replication.Txn, size int) {
	if tableless {
		f := &rowless{ev: *ev, pub: a.pub, txn: txn, size: size, at: at.row()}
		f.sent = a.pub.acks.sent()
		f.Done(err)
		return
	}
	f := inflights.Get().(*inflight)
	*f = inflight{ev: *ev, pub: a.pub, txn: txn, size: size, at: at.row()}
	f.sent = a.pub.acks.sent()
	f.Done(err)
}

func (a atLeastOnce) unmappable(row outbox.Event, reason error, at position, txn *replication.Txn) {
	a.pub.deadLetter(row, reason, at, txn)
}

func (atLeastOnce) tick() error { return nil }

// drain waits for the broker's acks, then for their bookkeeping and the dead-letter
// rows of table-less events.
func (a atLeastOnce) drain(ctx context.Context) error {
	if err := a.pub.sink.Flush(ctx); err != nil {
		return err
	}
	if err := a.pub.bk.Wait(ctx); err != nil {
		return err
	}
	return a.pub.waitInserts(ctx)
}
