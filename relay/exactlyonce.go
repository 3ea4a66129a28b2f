package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/decoder"
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
// transaction) in the progress topic; a new session reads the position and skips the
// events before it, so a crash between the Kafka commit and the LSN confirmation
// repeats nothing. Events settle in the watermark when their Kafka transaction
// commits.
type eoPipeline struct {
	dec      *decoder.Decoder
	msg      decoder.Message
	wm       *replication.Watermark
	tx       *kafka.Transactional
	done     kafka.Position // committed by earlier sessions
	pub      *publisher     // bookkeeping: marks, dead letters, handovers
	handOver *sync.Map      // event id -> error: events to give the poller, kept across sessions
	interval time.Duration
	maxBatch int

	lsn     pglogrepl.LSN // commit LSN of the database transaction being read
	idx     int           // inserts of it read so far
	batch   []eoPending
	started time.Time
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
			if !p.done.Covers(p.lsn, idx) {
				p.pub.deadLetter(p.wm, rowErr.ID, rowErr, p.lsn)
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
			// bookkeeping: settle it as acked, marking it like any other.
			p.settleAcked(&ev, txn, size)
			return nil
		}
		if reason, ok := p.handOver.Load(ev.ID); ok {
			// It poisoned an earlier Kafka transaction: record the failed attempt for
			// the poller (at least once from there) and leave it out.
			p.handOver.Delete(ev.ID)
			e := ev
			p.pub.bk.Record(poller.Outcome{Event: &e, Err: reason.(error), LSN: p.lsn, Settle: poller.SettleFunc(func(err error) {
				txn.Done(size, err)
			})})
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
	err := p.tx.Commit(ctx, kafka.Position{LSN: p.lsn, Events: p.idx})
	for id, reason := range p.tx.Poisoned() {
		p.handOver.Store(id, reason) // the next session hands it over and commits the rest
	}
	for _, b := range p.batch {
		if err != nil {
			b.txn.Done(b.size, err)
			continue
		}
		p.pub.m.published.Inc()
		p.settleAcked(b.ev, b.txn, b.size)
	}
	clear(p.batch)
	p.batch = p.batch[:0]
	return err
}

// settleAcked settles an event that is in Kafka: at once with --on-publish none,
// else once its row's bookkeeping committed.
func (p *eoPipeline) settleAcked(ev *outbox.Event, txn *replication.Txn, size int) {
	if !p.pub.markAcks {
		txn.Done(size, nil)
		return
	}
	p.pub.bk.Record(poller.Outcome{Event: ev, Settle: poller.SettleFunc(func(err error) {
		if err != nil {
			err = fmt.Errorf("bookkeeping for event %s: %w", ev.ID, err)
		}
		txn.Done(size, err)
	})})
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
// producers of the slot, then reads the position they committed.
func (r *Relay) exactlyOnce(ctx context.Context, wm *replication.Watermark, dec *decoder.Decoder, pub *publisher) (*eoPipeline, func(), error) {
	tx, err := kafka.NewTransactional(r.kafkaConfig(), r.cfg.Slot, r.cfg.ProgressTopic)
	if err != nil {
		return nil, nil, err
	}
	if err := tx.EnsureProgressTopic(ctx); err != nil {
		tx.Close()
		return nil, nil, err
	}
	if err := tx.Fence(ctx); err != nil {
		tx.Close()
		return nil, nil, err
	}
	secOpts, err := r.cfg.KafkaSecurity.Opts()
	if err != nil {
		tx.Close()
		return nil, nil, err
	}
	pos, ok, err := tx.ReadProgress(ctx, r.cfg.KafkaBrokers, append(secOpts, r.cfg.KafkaOpts...)...)
	if err != nil {
		tx.Close()
		return nil, nil, err
	}
	if ok {
		r.log.Info("exactly-once: events up to this position are in Kafka already", "slot", r.cfg.Slot, "position", pos.String())
	}
	return &eoPipeline{dec: dec, wm: wm, tx: tx, done: pos, pub: pub, handOver: &r.eoHandOver, interval: r.cfg.StatusInterval,
		maxBatch: max(1, r.cfg.MaxInFlightEvents/2)}, tx.Close, nil
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
