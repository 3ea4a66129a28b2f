package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/internal/drain"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink/kafka"
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

// eoPipeline produces the stream's events in Kafka transactions. Each transaction
// ends with the position it reaches (commit LSN and event index within that database
// transaction, with the origin of that LSN) in the progress topic; a new session
// reads the position and skips the events before it, so a crash between the Kafka
// commit and the LSN confirmation repeats nothing. Events settle in the watermark
// when their Kafka transaction commits.
//
// A position covers indexes, not events: the rows at indexes it covers that were not
// produced (handed over, dead-lettered) must have their bookkeeping committed before
// the Kafka transaction that covers them, and a later session must not mark them
// (docs/design.md invariant 2).
type eoPipeline struct {
	dec      *decoder.Decoder
	msg      decoder.Message
	wm       *replication.Watermark
	tx       *kafka.Transactional
	origin   string         // of this session's LSNs
	done     kafka.Position // committed by earlier sessions
	pub      *publisher     // bookkeeping: marks, dead letters, handovers
	handOver *sync.Map      // event id -> error: events to give the poller, kept across sessions
	interval time.Duration
	maxBatch int

	lsn     pglogrepl.LSN // commit LSN of the database transaction being read
	idx     int           // inserts of it read so far
	batch   []eoPending
	started time.Time

	// left counts hand-overs and dead letters not yet committed; the next Kafka
	// commit waits for them.
	left struct {
		sync.Mutex
		n   drain.Count
		err error
	}
}

type eoPending struct {
	ev   *outbox.Event
	txn  *replication.Txn
	size int
}

func (p *eoPipeline) HandleWAL(ctx context.Context, data []byte) error {
	if err := p.dec.Decode(data, &p.msg); err != nil {
		var rowErr *decoder.RowError
		if errors.As(err, &rowErr) && rowErr.ID != "" {
			idx := p.idx
			p.idx++
			if !p.done.Covers(p.lsn, idx) { // covered: dead-lettered before that commit
				p.pub.m.failed.WithLabelValues("").Inc()
				p.leaveOut(poller.Outcome{Event: &outbox.Event{ID: rowErr.ID}, Err: rowErr, Unpublishable: true, LSN: p.lsn},
					p.wm.Track(0), 0)
			}
			return nil
		}
		return err
	}
	switch p.msg.Kind {
	case decoder.KindBegin:
		p.wm.Begin()
		p.lsn, p.idx = p.msg.FinalLSN, 0
	case decoder.KindInsert:
		idx := p.idx
		p.idx++
		ev := p.msg.Event
		size := ev.Size()
		txn := p.wm.Track(size)
		if p.done.Covers(p.lsn, idx) {
			// Committed to Kafka by an earlier session, which may have died before its
			// bookkeeping, or handed over by it: mark it unless the poller has it.
			p.settle(poller.Outcome{Event: &ev, Covered: true}, txn, size)
			return nil
		}
		if reason, ok := p.handOver.Load(ev.ID); ok {
			// It poisoned an earlier Kafka transaction: record the failed attempt for
			// the poller (at least once from there) and leave it out.
			p.handOver.Delete(ev.ID)
			p.leaveOut(poller.Outcome{Event: &ev, Err: reason.(error), LSN: p.lsn}, txn, size)
			return nil
		}
		if err := p.tx.Produce(&ev); err != nil {
			txn.Done(size, err)
			return err
		}
		if len(p.batch) == 0 {
			p.started = time.Now()
		}
		p.batch = append(p.batch, eoPending{ev: &ev, txn: txn, size: size})
		if len(p.batch) >= p.maxBatch {
			return p.commit()
		}
	case decoder.KindCommit:
		p.wm.Commit(p.msg.EndLSN)
	}
	return nil
}

// commit ends the open Kafka transaction at the current position; its events then
// get the --on-publish bookkeeping and settle like acked ones. After a failure they
// stay unsettled and the session ends.
func (p *eoPipeline) commit() error {
	if len(p.batch) == 0 {
		return nil
	}
	// Not the stream's context: a commit that was started must finish or fail.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := p.waitLeftOut(ctx)
	if err == nil {
		err = p.tx.Commit(ctx, kafka.Position{LSN: p.lsn, Events: p.idx, Origin: p.origin})
	}
	for id, reason := range p.tx.Poisoned() {
		p.handOver.Store(id, reason) // the next session hands it over and commits the rest
	}
	for _, b := range p.batch {
		if err != nil {
			b.txn.Done(b.size, err)
			continue
		}
		p.pub.m.published.Inc()
		p.settle(poller.Outcome{Event: b.ev}, b.txn, b.size)
	}
	clear(p.batch)
	p.batch = p.batch[:0]
	return err
}

// settle settles an event that is in Kafka (o.Err nil): at once with --on-publish
// none, else once its row's bookkeeping committed.
func (p *eoPipeline) settle(o poller.Outcome, txn *replication.Txn, size int) {
	if !p.pub.markAcks {
		txn.Done(size, nil)
		return
	}
	id := o.Event.ID
	o.Settle = poller.SettleFunc(func(err error) {
		if err != nil {
			err = fmt.Errorf("bookkeeping for event %s: %w", id, err)
		}
		txn.Done(size, err)
	})
	p.pub.bk.Record(o)
}

// leaveOut gives an event that is not produced to the poller (a failed attempt) or
// the dead letters, and counts it until that is committed.
func (p *eoPipeline) leaveOut(o poller.Outcome, txn *replication.Txn, size int) {
	p.left.Lock()
	p.left.n.Add(1)
	p.left.Unlock()
	id := o.Event.ID
	o.Settle = poller.SettleFunc(func(err error) {
		if err != nil {
			err = fmt.Errorf("hand event %s to the poller: %w", id, err)
		}
		p.left.Lock()
		if err != nil && p.left.err == nil {
			p.left.err = err
		}
		p.left.n.Add(-1)
		p.left.Unlock()
		txn.Done(size, err)
	})
	p.pub.bk.Record(o)
}

// waitLeftOut waits until every event left out so far is committed to the poller
// or the dead letters: the position about to be committed covers their indexes.
func (p *eoPipeline) waitLeftOut(ctx context.Context) error {
	if _, err := p.left.n.Wait(ctx, &p.left); err != nil {
		return fmt.Errorf("wait for hand-overs before the kafka commit: %w", err)
	}
	p.left.Lock()
	defer p.left.Unlock()
	return p.left.err
}

func (p *eoPipeline) Tick(context.Context) error {
	if len(p.batch) > 0 && time.Since(p.started) >= p.interval {
		return p.commit()
	}
	return nil
}

func (p *eoPipeline) Drain(ctx context.Context) error {
	if err := p.commit(); err != nil {
		return err
	}
	return p.pub.bk.Wait(ctx)
}

// exactlyOnce prepares a session's transactional producer: it fences earlier
// producers of the stream, then reads the position they committed and keeps it only
// when it comes from this stream's WAL history (docs/design.md invariant 8).
func (r *Relay) exactlyOnce(ctx context.Context, rc *replication.Conn, slotCreated time.Time, wm *replication.Watermark,
	dec *decoder.Decoder, pub *publisher) (*eoPipeline, func(), error) {
	origin, serverPos, err := rc.Identify(ctx, r.cfg.Slot, slotCreated)
	if err != nil {
		return nil, nil, err
	}
	tx, err := kafka.NewTransactional(r.kafkaConfig(), origin.Key(), r.cfg.ProgressTopic)
	if err != nil {
		return nil, nil, err
	}
	pos, err := r.readPosition(ctx, rc, tx, origin, serverPos)
	if err != nil {
		tx.Close()
		return nil, nil, err
	}
	return &eoPipeline{dec: dec, wm: wm, tx: tx, origin: origin.String(), done: pos, pub: pub, handOver: &r.eoHandOver,
		interval: r.cfg.StatusInterval, maxBatch: max(1, r.cfg.MaxInFlightEvents/2)}, tx.Close, nil
}

// readPosition fences and reads the stream's committed position. A position from
// another WAL history is ignored, loudly: trusting it would skip events never
// produced; ignoring it repeats, at worst, what the slot had not confirmed.
func (r *Relay) readPosition(ctx context.Context, rc *replication.Conn, tx *kafka.Transactional, origin replication.Origin,
	serverPos pglogrepl.LSN) (kafka.Position, error) {
	if err := tx.EnsureProgressTopic(ctx); err != nil {
		return kafka.Position{}, err
	}
	if err := tx.Fence(ctx); err != nil {
		return kafka.Position{}, err
	}
	secOpts, err := r.cfg.KafkaSecurity.Opts()
	if err != nil {
		return kafka.Position{}, err
	}
	pos, ok, err := tx.ReadProgress(ctx, r.cfg.KafkaBrokers, append(secOpts, r.cfg.KafkaOpts...)...)
	if err != nil || !ok {
		return kafka.Position{}, err
	}
	stored, err := replication.ParseOrigin(pos.Origin)
	why := "an origin walrelay cannot read"
	if err == nil {
		var same bool
		if same, why, err = rc.Continues(ctx, stored, pos.LSN, origin, serverPos); err != nil {
			return kafka.Position{}, err
		}
		if same {
			r.log.Info("exactly-once: events up to this position are in Kafka already", "slot", r.cfg.Slot, "position", pos.String())
			return pos, nil
		}
	}
	r.log.Error("exactly-once: ignoring the stored position, which comes from "+why+"; events the slot has not "+
		"confirmed are produced again, so read_committed consumers may see some twice",
		"slot", r.cfg.Slot, "position", pos.String(), "origin", origin.String())
	return kafka.Position{}, nil
}

func (c *Config) validateDelivery() error {
	switch c.Delivery {
	case AtLeastOnce:
		return nil
	case ExactlyOnce:
		if c.SinkKind != SinkKafka || c.Sink != nil || c.Mode != ModeStream {
			return errors.New("delivery exactly-once needs the Kafka sink in stream mode")
		}
		if c.ProgressTopic == "" {
			return errors.New("delivery exactly-once needs a progress topic")
		}
		return nil
	}
	return fmt.Errorf("delivery %q: want at-least-once or exactly-once", c.Delivery)
}
