package relay

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// The table-less outbox (outbox.Emit): a transactional logical message with the
// events' prefix is an event in its transaction's place, tracked and confirmed like
// an inserted row (docs/design.md invariant 1), but it has no row to mark, so it
// settles at the broker's ack in every --on-publish mode. One the broker refuses for
// what it is becomes a row for the poller, and a message that is no event a
// dead-letter row, each committed before its transaction settles (invariant 2).

// message hands the decoded table-less event to the delivery.
func (p *pipeline) message(ctx context.Context) error {
	t := &p.tables[p.msg.Table]
	t.label(&p.msg.Event)
	verdict, err := p.checkSchemas(ctx)
	if err != nil {
		return err // held: nothing was done with the message
	}
	size := p.msg.Event.Size()
	if verdict != nil {
		p.d.refuse(&p.msg.Event, verdict, true, p.at, p.track(size), size)
	} else {
		err = p.d.message(p.msg.Event, p.at, p.track(size), size)
	}
	p.at.idx++
	return err
}

// malformed dead-letters a message with the events' prefix that is no event.
func (p *pipeline) malformed(me *decoder.MessageError) {
	row := malformedRow(me, p.at.committed)
	p.tables[p.msg.Table].label(&row)
	p.d.malformedMessage(row, me, p.at, p.track(0))
	p.at.idx++
}

// malformedRow is the dead-letter row of a message that is no event. Its id comes
// from the message's LSN, so the message streamed again after a crash finds its row.
func malformedRow(me *decoder.MessageError, committed time.Time) outbox.Event {
	sum := sha256.Sum256(fmt.Appendf(nil, "walrelay message %s %s", me.LSN, me.Prefix))
	sum[6] = sum[6]&0x0f | 0x80 // version 8: a name-based UUID of our own
	sum[8] = sum[8]&0x3f | 0x80
	payload, _ := json.Marshal(map[string]string{ // never fails: strings only
		"lsn": me.LSN.String(), "prefix": me.Prefix, "content_base64": base64.StdEncoding.EncodeToString(me.Content)})
	if committed.IsZero() {
		committed = time.Now()
	}
	return outbox.Event{ID: fmt.Sprintf("%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16]),
		AggregateType: "walrelay.message", AggregateID: me.LSN.String(), EventType: "malformed",
		Payload: payload, CreatedAt: committed}
}

// rowless is an inflight table-less event: there is no row to mark.
type rowless inflight

// publishMessage sends a table-less event to the sink.
func (p *publisher) publishMessage(ev outbox.Event, at position, txn *replication.Txn, size int) {
	f := &rowless{ev: ev, pub: p, txn: txn, size: size, at: at.row()}
	p.send((*inflight)(f), f)
}

// Done takes the sink's verdict: settled at the ack, handed over on an event error.
func (f *rowless) Done(err error) {
	p := f.pub
	p.acks.answered(f.sent, err)
	if f.span != nil {
		finish(f.span, err)
	}
	switch {
	case err == nil:
		p.m.published.Inc()
		if !f.at.committed.IsZero() {
			p.m.commitToAck.Observe(time.Since(f.at.committed).Seconds())
		}
		f.txn.Done(f.size, nil)
	case sink.IsEventError(err):
		p.m.failed.WithLabelValues(f.ev.EventType).Inc()
		p.handOverMessage(&f.ev, err, f.at.position(), f.txn, f.size, nil)
	default:
		p.m.failed.WithLabelValues(f.ev.EventType).Inc()
		f.txn.Done(f.size, fmt.Errorf("publish event %s (event_type %s, aggregate_id %s): %w",
			f.ev.ID, f.ev.EventType, f.ev.AggregateID, err))
	}
}

// handOverMessage makes a table-less event a row of its outbox table: a failed
// attempt for the poller (the bookkeeping's insert), or, when the table cannot store
// its payload, a dead letter with the payload in base64. txn's event settles once
// the row is committed; then, when set, is told first.
func (p *publisher) handOverMessage(ev *outbox.Event, reason error, at position, txn *replication.Txn, size int, then func(error)) {
	store := p.stores[ev.Table]
	if store == nil || store.Holds(ev.Payload) {
		// No store: the bookkeeping says the table is not this relay's and the event
		// stays unsettled.
		p.record(poller.Outcome{Event: ev, Err: reason, LSN: at.lsn}, txn, size, then)
		return
	}
	row := *ev
	row.Payload, _ = json.Marshal(map[string]string{"payload_base64": base64.StdEncoding.EncodeToString(ev.Payload)})
	p.insertDeadLetter(store, &row, fmt.Errorf("%w; its payload cannot be stored in %s's payload column, "+
		"so it is a dead letter with the payload in base64", reason, store.Table()), txn, size, then)
}

// deadLetterMessage inserts the dead-letter row of a message that is no event.
func (p *publisher) deadLetterMessage(row outbox.Event, me *decoder.MessageError, txn *replication.Txn, then func(error)) {
	p.m.failed.WithLabelValues("").Inc()
	store := p.stores[row.Table]
	if store == nil {
		err := fmt.Errorf("dead-letter logical message at %s: no outbox table %q", me.LSN, row.Table)
		if then != nil {
			then(err)
		}
		txn.Done(0, err)
		return
	}
	p.insertDeadLetter(store, &row, me, txn, 0, then)
}

// deadLetterTimeout bounds one dead-letter insert; a failure leaves the event
// unsettled and ends the session, which streams the message again.
const deadLetterTimeout = 30 * time.Second

// insertDeadLetter inserts row as a dead letter off the stream's goroutine: rare,
// and the stream must not wait on the database.
func (p *publisher) insertDeadLetter(store *poller.Store, row *outbox.Event, reason error, txn *replication.Txn, size int, then func(error)) {
	p.log.Error("table-less outbox event cannot be published; inserting it as a dead letter",
		"event_id", row.ID, "table", store.Table(), "err", reason)
	p.inserts.Lock()
	p.inserts.n.Add(1)
	p.inserts.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), deadLetterTimeout)
		defer cancel()
		err := store.InsertDeadLetter(ctx, row, reason)
		if then != nil {
			then(err)
		}
		txn.Done(size, err)
		p.inserts.Lock()
		p.inserts.n.Add(-1)
		p.inserts.Unlock()
	}()
}

// waitInserts waits until the dead-letter inserts under way are done, so that a
// graceful stop settles them too.
func (p *publisher) waitInserts(ctx context.Context) error {
	_, err := p.inserts.n.Wait(ctx, &p.inserts)
	return err
}

func (a atLeastOnce) message(ev outbox.Event, at position, txn *replication.Txn, size int) error {
	a.pub.publishMessage(ev, at, txn, size)
	return nil
}

func (a atLeastOnce) malformedMessage(row outbox.Event, me *decoder.MessageError, _ position, txn *replication.Txn) {
	a.pub.deadLetterMessage(row, me, txn, nil)
}

// outsideMessage logs a non-transactional message with the events' prefix: it is
// not atomic with any transaction, so it is no event.
func (r *Relay) outsideMessage() {
	r.log.Warn("ignored a non-transactional logical message with the events' prefix: it is not part of any "+
		"transaction, so it is not an outbox event; write events with outbox.Emit, which makes them transactional",
		"prefix", r.cfg.MessagePrefix)
}

// message produces a table-less event into the open Kafka transaction, like event
// does a row's, except that nothing marks it: covered by an earlier session's
// position it is settled at once, and one that poisoned an earlier Kafka
// transaction is made a row for the poller before the next position covers it.
func (p *exactlyOnce) message(ev outbox.Event, at position, txn *replication.Txn, size int) error {
	p.reached = sink.Position{LSN: at.lsn, Events: at.idx + 1, Origin: p.origin}
	if p.done.Covers(at.lsn, at.idx) {
		txn.Done(size, nil)
		return nil
	}
	if reason, ok := p.handOver.LoadAndDelete(sink.KeyOf(&ev)); ok {
		p.leaveOutWith(func(then func(error)) {
			p.pub.handOverMessage(&ev, reason.(error), at, txn, size, then)
		})
		return nil
	}
	return p.produce(eoPending{ev: &ev, txn: txn, size: size, rowless: true}, at)
}

func (p *exactlyOnce) malformedMessage(row outbox.Event, me *decoder.MessageError, at position, txn *replication.Txn) {
	p.reached = sink.Position{LSN: at.lsn, Events: at.idx + 1, Origin: p.origin}
	if p.done.Covers(at.lsn, at.idx) { // dead-lettered before that commit
		txn.Done(0, nil)
		return
	}
	p.leaveOutWith(func(then func(error)) { p.pub.deadLetterMessage(row, me, txn, then) })
}

// leaveOutWith counts an event left out until write, which gives it its row, calls
// then: the next Kafka commit waits for that.
func (p *exactlyOnce) leaveOutWith(write func(then func(error))) {
	p.left.Lock()
	p.left.n.Add(1)
	p.left.Unlock()
	write(func(err error) {
		p.left.Lock()
		defer p.left.Unlock()
		if err != nil && p.left.err == nil {
			p.left.err = err
		}
		p.left.n.Add(-1)
	})
}
