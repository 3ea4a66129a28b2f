package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// session runs one replication session: preflight checks, the slot (created with a
// catch-up pass when new), then the stream until ctx ends or something fails.
func (r *Relay) session(ctx context.Context, snk sink.Sink, bk *poller.Bookkeeper) error {
	defer func() {
		r.active.Store(false)
		r.metrics.leader.Set(0)
	}()
	conn, err := r.connect(ctx)
	if err != nil {
		return errorf("connect to postgresql", err)
	}
	defer conn.Close(context.Background())

	st, err := replication.Preflight(ctx, conn, r.cfg.Table, r.cfg.Publication, r.cfg.Slot)
	if err != nil {
		return err
	}
	rc, err := replication.Connect(ctx, r.cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer rc.Close()

	start, created, err := r.prepareSlot(ctx, conn, rc, snk, bk, st)
	if err != nil {
		return err
	}
	// The connection stays open for the table checks before each confirmation.
	watch, err := replication.WatchTable(ctx, conn, r.cfg.Table, r.cfg.Publication, r.cfg.Slot)
	if err != nil {
		return err
	}

	keepalive := r.cfg.KeepaliveInterval
	if senderTimeout, err := rc.SenderTimeout(ctx); err != nil {
		return err
	} else if senderTimeout > 0 && senderTimeout/3 < keepalive {
		keepalive = max(senderTimeout/3, r.cfg.StatusInterval)
	}

	schema, table := replication.SplitTable(r.cfg.Table)
	wm := replication.NewWatermark(r.window, start)
	var h replication.Handler = &pipeline{dec: decoder.New(schema, table), wm: wm, pub: r.publisher(snk, bk)}
	if r.cfg.Delivery == ExactlyOnce {
		eo, closeTx, err := r.exactlyOnce(ctx, rc, created, wm, decoder.New(schema, table), r.publisher(snk, bk))
		if err != nil {
			return err
		}
		defer closeTx()
		h = eo
	}
	r.log.Info("streaming", "slot", r.cfg.Slot, "publication", r.cfg.Publication, "table", r.cfg.Table,
		"from_lsn", start.String())
	return rc.Stream(ctx, replication.StreamConfig{
		Slot:              r.cfg.Slot,
		Publication:       r.cfg.Publication,
		StatusInterval:    r.cfg.StatusInterval,
		KeepaliveInterval: keepalive,
		ShutdownTimeout:   r.cfg.ShutdownTimeout,
		Logger:            r.log,
		OnStart: func() {
			r.active.Store(true)
			r.metrics.leader.Set(1)
		},
		OnConfirm: func(lsn pglogrepl.LSN) {
			r.metrics.confirmedLSN.Set(float64(lsn))
			r.metrics.lastConfirm.SetToCurrentTime()
		},
		BeforeConfirm: func(ctx context.Context) error { return watch.Check(ctx, conn) },
	}, wm, h)
}

// pipeline feeds decoded outbox inserts to the publisher and transaction boundaries
// to the watermark.
type pipeline struct {
	dec *decoder.Decoder
	msg decoder.Message
	wm  *replication.Watermark
	pub *publisher

	commitTime time.Time     // of the open transaction
	commitLSN  pglogrepl.LSN // of the open transaction
}

func (p *pipeline) HandleWAL(_ context.Context, data []byte) error {
	if err := p.dec.Decode(data, &p.msg); err != nil {
		var rowErr *decoder.RowError
		if errors.As(err, &rowErr) && rowErr.ID != "" {
			p.pub.deadLetter(p.wm, rowErr.ID, rowErr, p.commitLSN)
			return nil
		}
		return err
	}
	switch p.msg.Kind {
	case decoder.KindBegin:
		p.wm.Begin()
		p.commitTime, p.commitLSN = p.msg.CommitTime, p.msg.FinalLSN
	case decoder.KindInsert:
		p.pub.publish(p.wm, p.msg.Event, p.commitLSN, p.commitTime)
	case decoder.KindCommit:
		p.wm.Commit(p.msg.EndLSN)
	}
	return nil
}

func (p *pipeline) Tick(context.Context) error { return nil }

// Drain waits for the broker's acks, then for their bookkeeping.
func (p *pipeline) Drain(ctx context.Context) error {
	if err := p.pub.sink.Flush(ctx); err != nil {
		return err
	}
	return p.pub.bk.Wait(ctx)
}

// publisher hands events to the sink and settles each in the watermark once it is
// safe: acked (and, unless on-publish is none, marked), or handed over to the poller
// with its failed attempt recorded. A broker-wide failure settles nothing: it fails
// the session, and the stream delivers the event again.
type publisher struct {
	sink     sink.Sink
	bk       *poller.Bookkeeper
	markAcks bool
	m        *metrics
}

func (r *Relay) publisher(snk sink.Sink, bk *poller.Bookkeeper) *publisher {
	return &publisher{sink: snk, bk: bk, markAcks: r.cfg.OnPublish != poller.None, m: r.metrics}
}

// deadLetter records a row the decoder could not map as a dead letter; like an
// event, it is settled once that is committed.
func (p *publisher) deadLetter(wm *replication.Watermark, id string, reason error, lsn pglogrepl.LSN) {
	txn := wm.Track(0)
	p.m.failed.WithLabelValues("").Inc()
	p.bk.Record(poller.Outcome{Event: &outbox.Event{ID: id}, Err: reason, Unpublishable: true, LSN: lsn,
		Settle: poller.SettleFunc(func(err error) {
			if err != nil {
				err = fmt.Errorf("dead-letter unpublishable row %s: %w", id, err)
			}
			txn.Done(0, err)
		})})
}

// inflight is one event between the sink and its settlement: all the per-event state
// in one allocation, which is also the sink's Done and the bookkeeping's Settler.
type inflight struct {
	ev        outbox.Event
	pub       *publisher
	txn       *replication.Txn
	size      int
	lsn       pglogrepl.LSN // the transaction's commit LSN
	committed time.Time     // the transaction's commit time; zero in the catch-up pass
}

// publish sends ev, an event of the watermark's open transaction.
func (p *publisher) publish(wm *replication.Watermark, ev outbox.Event, lsn pglogrepl.LSN, committed time.Time) {
	size := ev.Size()
	f := &inflight{ev: ev, pub: p, txn: wm.Track(size), size: size, lsn: lsn, committed: committed}
	p.sink.Publish(&f.ev, f)
}

// Done takes the sink's verdict.
func (f *inflight) Done(err error) {
	p := f.pub
	if err == nil {
		p.m.published.Inc()
		if !f.committed.IsZero() {
			p.m.commitToAck.Observe(time.Since(f.committed).Seconds())
		}
	} else {
		p.m.failed.WithLabelValues(f.ev.EventType).Inc()
	}
	switch {
	case err == nil && !p.markAcks:
		f.txn.Done(f.size, nil)
	case err == nil || sink.IsEventError(err):
		p.bk.Record(poller.Outcome{Event: &f.ev, Err: err, LSN: f.lsn, Settle: f})
	default:
		f.txn.Done(f.size, fmt.Errorf("publish event %s (event_type %s, aggregate_id %s): %w",
			f.ev.ID, f.ev.EventType, f.ev.AggregateID, err))
	}
}

// Settle takes the outcome of the event's bookkeeping.
func (f *inflight) Settle(err error) {
	if err != nil {
		err = fmt.Errorf("bookkeeping for event %s: %w", f.ev.ID, err)
	}
	f.txn.Done(f.size, err)
}
