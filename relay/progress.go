package relay

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/catalog"
)

// progress records the published horizon of --on-publish progress while one stream
// runs (docs/design.md invariant 10): every status interval in which the stream
// confirmed more, and at least every takeAtLeast, it takes a candidate
// (catalog.TakeHorizon, a read), and every progress interval, and once more when
// the stream stops, it records the newest candidate whose LSN the stream has
// confirmed. Nothing is written per row, and nothing at all while the
// horizon does not move, nor while it would move past no transaction the stream
// received outbox rows from (rows), but at least every recordAtLeast.
type progress struct {
	pool        *pgxpool.Pool
	slot        string
	incarnation time.Time // walrelay_slots.created_at of the slot being streamed
	tables      []string
	sample      time.Duration // how often a candidate is taken
	every       time.Duration // how often one is recorded
	onRecord    func(catalog.Published)
	moved       chan struct{} // a pending wake: the confirmed LSN moved

	mu struct {
		sync.Mutex
		confirmed  pglogrepl.LSN
		candidates []catalog.Published // oldest first
	}
	recorded   uint64    // the xid last recorded; written by the Run goroutine only
	by         uint64    // the xid of the transaction that recorded it (Run goroutine only)
	recordedAt time.Time // when (Run goroutine only)
	rows       rowXids   // noted by the stream's pipeline
}

// rowXids is the newest xid, in xid order, of a transaction the stream received
// outbox rows from. A horizon that moves past none of them says nothing about rows:
// on a server with several databases each relay's records are transactions in the
// others' WAL, and without this rule they would keep each other recording every
// progress interval (docs/performance.md, "Several databases").
type rowXids struct {
	v atomic.Uint64 // 0: none; else rowXidSeen | xid, or rowXidUnknown
}

const (
	rowXidSeen    = 1 << 32
	rowXidUnknown = 1 << 33 // a row without its xid: record as if none were covered
)

// note takes the xid of a transaction with outbox rows; one goroutine notes.
func (x *rowXids) note(xid uint32) {
	cur := x.v.Load()
	switch {
	case cur&rowXidUnknown != 0:
	case xid == 0:
		x.v.Store(rowXidUnknown)
	case cur == 0 || int32(xid-uint32(cur)) > 0:
		x.v.Store(rowXidSeen | uint64(xid))
	}
}

// recordAtLeast is the longest a horizon that can move waits to be recorded while it
// would move past no row (rowXids): well within WalrelayPublishedHorizonStuck's 15
// minutes (deploy/prometheus/alerts.yml).
const recordAtLeast = time.Minute

// coversNoNewRows reports whether the recorded horizon already covers every
// transaction the stream received rows from, so that recording a newer one may wait
// (at most recordAtLeast since the last record). The first record of a session is
// never skipped: it covers the catch-up pass's rows, whose xids the stream never saw.
func (p *progress) coversNoNewRows() bool {
	if p.recorded == 0 || time.Since(p.recordedAt) >= recordAtLeast {
		return false
	}
	v := p.rows.v.Load()
	switch {
	case v == 0:
		return true
	case v&rowXidUnknown != 0:
		return false
	default:
		return int32(uint32(v)-uint32(p.recorded)) < 0 // the newest row's xid is below the recorded horizon
	}
}

// confirmedNow is the newest LSN the session confirmed.
func (p *progress) confirmedNow() pglogrepl.LSN {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.confirmed
}

// maxCandidates bounds the candidates kept while the confirmed LSN lags (a backlog):
// when full, every other one is dropped, so the kept ones still span the lag.
const maxCandidates = 64

// confirmed takes the LSN the session just confirmed.
func (p *progress) confirmed(lsn pglogrepl.LSN) {
	p.mu.Lock()
	moved := lsn > p.mu.confirmed
	p.mu.confirmed = max(p.mu.confirmed, lsn)
	p.mu.Unlock()
	if moved {
		select {
		case p.moved <- struct{}{}:
		default:
		}
	}
}

// Run takes and records horizons until ctx ends, then records what the last
// confirmation covers. An incarnation this relay no longer owns ends it quietly.
func (p *progress) Run(ctx context.Context, log func(msg string, args ...any)) {
	timer := time.NewTimer(p.sample)
	defer timer.Stop()
	var lastRecord, lastTake time.Time
	var takenAt pglogrepl.LSN // the confirmed LSN when the last candidate was taken
	for {
		var err error
		if time.Since(lastRecord) >= p.every {
			err, lastRecord = p.record(ctx), time.Now()
		}
		if errors.Is(err, catalog.ErrNotSlotOwner) {
			// err says why: another instance created the slot again, or its row is gone.
			log("not recording the published horizon: the slot's incarnation is no longer this relay's", "slot", p.slot, "err", err)
			return
		} else if err != nil && ctx.Err() == nil {
			log("recording the published horizon failed; will try again", "slot", p.slot, "err", err)
		}
		if ctx.Err() != nil {
			// The stream's final confirmation comes as it stops: record what it covers.
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = p.record(final)
			cancel()
			return
		}
		// A candidate taken while the confirmed LSN stands still waits for the same
		// confirmation as the last one (no transaction ends without WAL, which the
		// stream confirms as it follows the server): an idle relay takes few.
		if at := p.confirmedNow(); at != takenAt || time.Since(lastTake) >= takeAtLeast {
			if c, err := catalog.TakeHorizon(ctx, p.pool); err == nil {
				p.add(c)
				takenAt, lastTake = at, time.Now()
			} else if ctx.Err() == nil {
				log("taking a published horizon failed; will try again", "slot", p.slot, "err", err)
			}
		}
		// Wake when the stream confirms more, to take a candidate; when one waits,
		// to record it a progress interval after the last; else to take one anyway.
		wait := takeAtLeast - time.Since(lastTake)
		if p.waiting() {
			wait = min(wait, p.every-time.Since(lastRecord))
		}
		timer.Reset(max(wait, p.sample))
		select {
		case <-ctx.Done():
		case <-p.moved:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// waiting reports whether a candidate waits to be recorded.
func (p *progress) waiting() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.candidates) > 0
}

// takeAtLeast is the longest time between two candidates while the confirmed LSN
// stands still.
const takeAtLeast = 10 * time.Second

// add keeps a candidate, thinning the list when it is full.
func (p *progress) add(c catalog.Published) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.mu.candidates); n > 0 && p.mu.candidates[n-1].XID == c.XID {
		return // no transaction finished since: nothing new to say
	}
	if len(p.mu.candidates) == maxCandidates {
		kept := p.mu.candidates[:0]
		for i, k := range p.mu.candidates {
			if i%2 == 1 {
				kept = append(kept, k)
			}
		}
		p.mu.candidates = kept
	}
	p.mu.candidates = append(p.mu.candidates, c)
}

// covered removes and returns the newest candidate the confirmed LSN covers.
func (p *progress) covered() (catalog.Published, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := 0
	for i < len(p.mu.candidates) && p.mu.candidates[i].LSN <= p.mu.confirmed {
		i++
	}
	if i == 0 {
		return catalog.Published{}, false
	}
	c := p.mu.candidates[i-1]
	p.mu.candidates = append(p.mu.candidates[:0], p.mu.candidates[i:]...)
	return c, true
}

// record writes the newest covered candidate, when it moves the horizon.
func (p *progress) record(ctx context.Context) error {
	c, ok := p.covered()
	if !ok || c.XID <= p.recorded || p.onlyOwn(c) || p.coversNoNewRows() {
		return nil
	}
	by, err := catalog.RecordPublishedBy(ctx, p.pool, p.slot, p.incarnation, c, p.tables)
	if err != nil {
		return err
	}
	p.recorded, p.by, p.recordedAt = c.XID, by, time.Now()
	if p.onRecord != nil {
		p.onRecord(c)
	}
	return nil
}

// onlyOwn reports whether c moves the horizon past nothing but the transaction that
// recorded the last one: the first xid assigned after that horizon was taken, and the
// only one below c. Recording it would say nothing about outbox rows and write a row
// whose WAL, once confirmed, brings the next such candidate: an idle relay would
// write a horizon every progress interval, for ever.
func (p *progress) onlyOwn(c catalog.Published) bool {
	return p.by != 0 && p.by == p.recorded && c.XID == p.by+1
}

// newProgress is the published-horizon recorder of a session streaming the slot's
// incarnation created at created.
func (r *Relay) newProgress(created time.Time) *progress {
	return &progress{pool: r.pool, slot: r.cfg.Slot, incarnation: created, tables: r.tableNames(),
		sample: r.cfg.StatusInterval, every: r.cfg.ProgressInterval, moved: make(chan struct{}, 1),
		onRecord: func(c catalog.Published) { r.metrics.horizonRecorded.SetToCurrentTime() }}
}
