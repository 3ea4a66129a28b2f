package relay

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// defaultProgressLogInterval is how often long work logs its progress.
const defaultProgressLogInterval = 5 * time.Second

// progressLog logs how far a long piece of work has come, at most once per
// interval: what is done, the rate, and, with a known total, the time left. Work
// that ends within the first interval logs nothing. One goroutine uses it.
type progressLog struct {
	log   *slog.Logger
	msg   string
	unit  string // what the counts count, as the attributes' prefix: "rows", "wal_bytes"
	total int64  // 0: unknown
	every time.Duration
	attrs []any // said on every line

	began, last time.Time
	logged      bool
}

func (r *Relay) newProgressLog(msg, unit string, total int64, attrs ...any) *progressLog {
	every := r.cfg.ProgressLogInterval
	if every <= 0 {
		every = defaultProgressLogInterval
	}
	now := time.Now()
	return &progressLog{log: r.log, msg: msg, unit: unit, total: total, every: every, attrs: attrs, began: now, last: now}
}

// update takes the count done so far, and logs it when an interval has passed since
// the last line. extra are attributes of this line only.
func (p *progressLog) update(now time.Time, done int64, extra ...any) {
	if now.Sub(p.last) < p.every {
		return
	}
	p.last, p.logged = now, true
	p.log.Info(p.msg, p.line(now, done, extra)...)
}

// finish logs msg with the final count, when the work logged progress before.
func (p *progressLog) finish(now time.Time, done int64, msg string, extra ...any) {
	if !p.logged {
		return
	}
	attrs := append(append([]any{}, p.attrs...), p.unit, done, "took", now.Sub(p.began).Round(time.Millisecond).String(),
		p.unit+"_per_second", rate(done, now.Sub(p.began)))
	p.log.Info(msg, append(attrs, extra...)...)
}

// line is the attributes of a progress line.
func (p *progressLog) line(now time.Time, done int64, extra []any) []any {
	elapsed := now.Sub(p.began)
	perSecond := rate(done, elapsed)
	attrs := append(append([]any{}, p.attrs...), p.unit, done)
	if p.total > 0 {
		attrs = append(attrs, p.unit+"_total", p.total, "percent", int(100*float64(done)/float64(p.total)))
	}
	attrs = append(attrs, p.unit+"_per_second", perSecond)
	if p.total > 0 && perSecond > 0 && done < p.total {
		left := time.Duration(float64(p.total-done) / float64(perSecond) * float64(time.Second))
		attrs = append(attrs, "eta", left.Round(time.Second).String())
	}
	return append(attrs, extra...)
}

func rate(done int64, elapsed time.Duration) int64 {
	if elapsed <= 0 {
		return 0
	}
	return int64(float64(done) / elapsed.Seconds())
}

// backlog follows a session through the WAL that was already written when it
// started, from the slot's position to the server's, and logs its progress: the
// bytes of WAL read and relayed (confirmable), and the events received.
type backlog struct {
	from, to pglogrepl.LSN
	events   int64 // received since the start
	log      *progressLog
}

// at takes the confirmable LSN and the position read; it reports whether the backlog
// is relayed. The line counts the WAL read (its percent and time left), and the WAL
// relayed beside it: a large transaction holds the confirmable LSN at its start until
// all of its events are settled, while its events flow.
func (b *backlog) at(now time.Time, confirmable, read pglogrepl.LSN) bool {
	if confirmable >= b.to {
		b.log.finish(now, int64(b.to-b.from), "caught up with the WAL written before the start", "events", b.events)
		return true
	}
	done := func(lsn pglogrepl.LSN) int64 { return int64(min(max(lsn, b.from), b.to) - b.from) }
	b.log.update(now, done(read), "relayed_wal_bytes", done(confirmable),
		"events", b.events, "events_per_second", rate(b.events, now.Sub(b.log.began)))
	return false
}

// newBacklog follows the WAL between start, where the session streams from, and the
// server's position now (its replay position on a standby); nil when there is none,
// or when the position cannot be read, which only costs the progress lines.
func (r *Relay) newBacklog(ctx context.Context, conn *pgx.Conn, start pglogrepl.LSN) *backlog {
	var text string
	err := conn.QueryRow(ctx, `SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()
		ELSE pg_current_wal_lsn() END)::text`).Scan(&text)
	to, perr := pglogrepl.ParseLSN(text)
	if err != nil || perr != nil {
		r.log.Debug("no progress lines for the WAL written before the start: its end is unknown", "err", errors.Join(err, perr))
		return nil
	}
	if to <= start {
		return nil
	}
	return &backlog{from: start, to: to, log: r.newProgressLog("relaying the WAL written before the start", "read_wal_bytes", int64(to-start),
		"slot", r.cfg.Slot, "from_lsn", start.String(), "to_lsn", to.String())}
}
