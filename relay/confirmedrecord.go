package relay

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/catalog"
)

// confirmedRecord keeps the relay's own record of what a session confirmed
// (walrelay_confirmed, migration 9), in the database where the bookkeeping lives, so
// that a session after a restart or crash of the server resumes there rather than
// where the slot was last saved (resumeFrom). It records only LSNs the stream sent as
// its confirmed flush position (docs/design.md invariant 1), so the record never runs
// ahead of the broker; at most once per progress interval, and only when the
// confirmations since the last record passed events: an idle relay writes nothing.
type confirmedRecord struct {
	pool   *pgxpool.Pool
	origin catalog.Origin // of the session's LSNs
	every  time.Duration
	moved  chan struct{} // a pending wake: events were confirmed
	log    *slog.Logger

	mu struct {
		sync.Mutex
		lsn     pglogrepl.LSN // the newest LSN the stream confirmed
		pending uint64        // confirmations that passed events, counted
	}
	recorded uint64 // pending when the record was last written (Run goroutine only)
}

// confirmed takes an LSN the stream just confirmed; events says whether the
// confirmation passed events not confirmed before.
func (c *confirmedRecord) confirmed(lsn pglogrepl.LSN, events bool) {
	c.mu.Lock()
	c.mu.lsn = max(c.mu.lsn, lsn)
	if events {
		c.mu.pending++
	}
	c.mu.Unlock()
	if events {
		c.wake()
	}
}

// Run records the confirmed LSN once events were confirmed, at most once per progress
// interval, until ctx ends, then once more for the final confirmation. It sleeps while
// nothing is confirmed: an idle relay does not wake for it. A server that cannot be
// written to (restarting) is tried again an interval later.
func (c *confirmedRecord) Run(ctx context.Context) {
	final := func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = c.record(ctx)
		cancel()
	}
	timer := time.NewTimer(c.every)
	timer.Stop()
	defer timer.Stop()
	var last time.Time
	failing := false
	for {
		select {
		case <-ctx.Done():
			final()
			return
		case <-c.moved:
		}
		timer.Reset(c.every - time.Since(last))
		select {
		case <-ctx.Done():
			final()
			return
		case <-timer.C:
		}
		last = time.Now()
		err := c.record(ctx)
		switch {
		case err == nil:
			failing = false
		case ctx.Err() != nil:
		default:
			if !failing {
				c.log.Warn("recording the confirmed position failed; will try again", "slot", c.origin.Slot, "err", err)
				failing = true
			}
			c.wake() // what failed is still to record
		}
	}
}

// wake has Run record at its next chance.
func (c *confirmedRecord) wake() {
	select {
	case c.moved <- struct{}{}:
	default:
	}
}

// record writes the newest confirmed LSN when confirmations passed events since the
// last write.
func (c *confirmedRecord) record(ctx context.Context) error {
	c.mu.Lock()
	lsn, pending := c.mu.lsn, c.mu.pending
	c.mu.Unlock()
	if pending == c.recorded {
		return nil
	}
	began := time.Now()
	if _, err := catalog.RecordConfirmed(ctx, c.pool, c.origin, lsn); err != nil {
		return err
	}
	c.log.Debug("recorded the confirmed position", "lsn", lsn.String(), "took", time.Since(began))
	c.recorded = pending
	return nil
}

// newConfirmedRecord is the record of a session streaming the slot from origin; nil
// for exactly-once delivery, whose position in Kafka already skips what was produced.
func (r *Relay) newConfirmedRecord(origin catalog.Origin) *confirmedRecord {
	if r.cfg.Delivery == ExactlyOnce {
		return nil
	}
	return &confirmedRecord{pool: r.pool, origin: origin, every: r.cfg.ProgressInterval, moved: make(chan struct{}, 1), log: r.log}
}
