package ops

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// ReplayHeader marks a replayed record; its value is the replay's id. The record is
// otherwise the stream's, id header included, so consumers that deduplicate on the
// id drop what they already have (docs/operations.md, Replay).
const ReplayHeader = "walrelay_replay"

// ReplayFilter selects the outbox rows a replay publishes again. Empty fields do
// not filter; a row must match every field that is set.
type ReplayFilter struct {
	// Since and Until bound the rows' creation time, Since included, Until not.
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`

	AggregateType string   `json:"aggregate_type,omitempty"`
	AggregateID   string   `json:"aggregate_id,omitempty"`
	EventType     string   `json:"event_type,omitempty"`
	IDs           []string `json:"ids,omitempty"`
}

// ReplayOptions tune a replay.
type ReplayOptions struct {
	Filter ReplayFilter
	// ID names the replay: the value of ReplayHeader on its records.
	ID string
	// DryRun counts the rows and publishes nothing.
	DryRun bool
	// Rate bounds the events published per second (0: as fast as the sink takes them).
	Rate float64
	// MaxInFlight bounds the events handed to the sink and not yet settled (0: the
	// configuration's MaxInFlightEvents).
	MaxInFlight int
	// OnProgress, when set, is called at most every ProgressInterval (0: 5s) while the
	// replay runs, and once at the end.
	OnProgress       func(ReplayProgress)
	ProgressInterval time.Duration
	// Pause, when set, holds the replay: while it is paused the replay hands nothing
	// to the sink and its progress says Waiting "paused" (replaypause.go).
	Pause *replication.Pause
}

// ReplayProgress is how far a replay got.
type ReplayProgress struct {
	ID string `json:"id"`
	// Total is the number of matching rows counted at the start; rows written since
	// that match are replayed too, so Sent may pass it.
	Total  int64 `json:"total"`
	Sent   int64 `json:"sent"`   // acknowledged by the broker
	Failed int64 `json:"failed"` // refused by the broker after the sink's own retries
	// Skipped rows can never be events (a NULL id or column): the relay dead-letters them.
	Skipped   int64     `json:"skipped"`
	Rate      float64   `json:"events_per_second"`
	ETA       string    `json:"eta,omitempty"`
	StartedAt time.Time `json:"started_at"`
	Done      bool      `json:"done"`
	DryRun    bool      `json:"dry_run,omitempty"`
	Error     string    `json:"error,omitempty"`
	// Waiting says what the replay waits for before it publishes on: "paused" while
	// the relay is paused, "broker" while the broker acknowledged nothing for the
	// ack timeout (Stalled says since when).
	Waiting string `json:"waiting,omitempty"`
	// Stalled says how long the broker has acknowledged none of the events in flight,
	// once that is longer than the ack timeout.
	Stalled string `json:"stalled,omitempty"`
	// Note says where a --since older than the retention started instead.
	Note string `json:"note,omitempty"`
	// FailedIDs are the ids of the events that failed, up to MaxFailedIDs; FailedIDsAll
	// has them all, in the progress Replay returns only (not in JSON, not in
	// OnProgress: a replay can fail millions).
	FailedIDs    []string `json:"failed_ids,omitempty"`
	FailedIDsAll []string `json:"-"`
}

// MaxFailedIDs is how many failed ids a replay's progress names; the command writes
// them all to --failed-ids.
const MaxFailedIDs = 20

// ReplayWaitingBroker is ReplayProgress.Waiting while the broker acknowledges nothing.
const ReplayWaitingBroker = "broker"

// ParseReplayTime reads a replay's --since or --until: a time (RFC 3339), or a
// duration before now.
func ParseReplayTime(name, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if days, ok := strings.CutSuffix(v, "d"); ok {
		if n, err := strconv.ParseFloat(days, 64); err == nil && n >= 0 && n <= 36500 {
			return now.Add(-time.Duration(n * 24 * float64(time.Hour))), nil
		}
	}
	return time.Time{}, fmt.Errorf("%s: want a time like 2026-01-02T15:04:05Z or a duration before now like 2h or 30d, got %q", name, v)
}

// NewReplayID names a replay: the value of its records' ReplayHeader.
func NewReplayID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b)
}

// replayBatch is how many rows one statement of a replay reads: replays read in
// short statements, so none holds a snapshot (and with --on-publish progress the
// published horizon) back for the replay's length.
const replayBatch = 1000

// CheckReplay says up front whether the rows a replay asks for can still be in the
// table: not with --on-publish delete. A --since older than the retention is no
// refusal: the replay starts from the oldest row still kept (Replay's Note says so).
func CheckReplay(cfg relay.Config, f ReplayFilter, now time.Time) error {
	switch cfg.OnPublishMode() {
	case poller.Delete:
		return errors.New("cannot replay: with --on-publish delete every published row is deleted, so the events are gone " +
			"from the table; replay needs --on-publish progress (the default) or mark, which keep rows for --retention")
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
		return fmt.Errorf("cannot replay: --until %s is not after --since %s", f.Until.UTC().Format(time.RFC3339), f.Since.UTC().Format(time.RFC3339))
	}
	for _, t := range cfg.OutboxTables() {
		if t.Columns.CreatedAt == "" && (!f.Since.IsZero() || !f.Until.IsZero()) {
			return fmt.Errorf("cannot replay by time: table %s has no creation-time column (column-created-at is empty); "+
				"filter by aggregate, event type or ids instead", t.Table)
		}
	}
	return nil
}

// Replay publishes again, through snk, the outbox rows of cfg's tables that match
// opts.Filter, oldest first, as the stream publishes them plus ReplayHeader. It
// reads the table and writes nothing: the slot, and pending rows' bookkeeping, are
// left as they are. It returns the final progress; an error when the rows cannot be
// read or some events failed.
func Replay(ctx context.Context, pool *pgxpool.Pool, snk sink.Sink, cfg relay.Config, opts ReplayOptions) (ReplayProgress, error) {
	started := time.Now()
	p := &replayRun{opts: opts, progress: ReplayProgress{ID: opts.ID, StartedAt: started.UTC(), DryRun: opts.DryRun}}
	if err := CheckReplay(cfg, opts.Filter, started); err != nil {
		return p.finish(err)
	}
	// Schema ids are resolved before the sink, as the relay's stream and poller
	// resolve them (relay.ResolvingSink).
	snk, err := relay.ResolvingSink(cfg, snk, nil)
	if err != nil {
		return p.finish(err)
	}
	var tables []replayTable
	for _, tc := range cfg.OutboxTables() {
		shape, err := catalog.DescribeTable(ctx, pool, tc.Table, tc.Columns)
		if err != nil {
			return p.finish(err)
		}
		route, err := tableRoute(tc)
		if err != nil {
			return p.finish(err)
		}
		rt := replayTable{shape: shape, topic: tc.TopicTemplate, route: route}
		rt.where, rt.args = replayWhere(shape, opts.Filter)
		var n int64
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+shape.Ident()+" WHERE "+rt.where, rt.args...).Scan(&n); err != nil {
			return p.finish(fmt.Errorf("count the rows to replay in %s: %w", shape.Qualified(), err))
		}
		p.progress.Total += n
		tables = append(tables, rt)
	}
	if note, err := retentionNote(ctx, pool, cfg, opts.Filter, tables, started); err != nil {
		return p.finish(err)
	} else {
		p.progress.Note = note
	}
	if opts.DryRun {
		return p.finish(nil)
	}
	p.ackTimeout = cfg.AckTimeout
	p.lastSettled.Store(time.Now().UnixNano())
	p.stopTicker = p.tick()
	inFlight := opts.MaxInFlight
	if inFlight <= 0 {
		inFlight = cfg.MaxInFlightEvents
	}
	p.window = make(chan struct{}, max(inFlight, 1))
	for _, t := range tables {
		if err := p.table(ctx, pool, snk, t); err != nil {
			p.wait()
			return p.finish(err)
		}
	}
	p.wait()
	if err := snk.Flush(ctx); err != nil {
		return p.finish(fmt.Errorf("flush the replayed events: %w", err))
	}
	if f := p.failed.Load(); f > 0 {
		return p.finish(fmt.Errorf("%d of the replayed events failed (last: %v); replay them again by id "+
			"(walrelay replay --failed-ids FILE writes them, --id-file FILE reads them) or with the same filters", f, p.lastErr.Load()))
	}
	return p.finish(nil)
}

// tableRoute is t's topic routing by regular expression, as the relay routes its
// events; nil without one.
func tableRoute(t relay.TableConfig) (*record.Route, error) {
	if t.TopicRegex == "" {
		return nil, nil
	}
	return record.ParseRoute(t.TopicRegex, t.TopicReplacement)
}

// replayTable is one outbox table's part of a replay.
type replayTable struct {
	shape catalog.Shape
	topic string
	route *record.Route // TopicRegex, parsed; nil without one
	where string
	args  []any
}

// replayRun is one replay under way.
type replayRun struct {
	opts     ReplayOptions
	progress ReplayProgress
	window   chan struct{} // a slot per event in flight
	inFlight sync.WaitGroup
	sent     atomic.Int64
	failed   atomic.Int64
	skipped  atomic.Int64
	lastErr  atomic.Value // string: the last failure
	// lastSettled is when an event last settled (unix ns), for the broker's silence;
	// ackTimeout is how long a silence may last before the progress says so.
	lastSettled atomic.Int64
	ackTimeout  time.Duration
	failedMu    sync.Mutex
	failedIDs   []string
	reportMu    sync.Mutex // progress.Waiting, OnProgress and lastReport: the replaying goroutine and the ticker
	stopTicker  func()     // nil until the ticker runs
	// handed counts the events handed to the sink, for the rate; lastReport is when
	// OnProgress was last called. The replaying goroutine's alone, as is paceFrom.
	handed     int64
	paceFrom   time.Time // when the first event was handed over: the rate counts from there
	lastReport time.Time
}

// table replays one table, a batch per statement, in keyset order: creation time,
// then id.
func (p *replayRun) table(ctx context.Context, pool *pgxpool.Pool, snk sink.Sink, t replayTable) error {
	key := replayKey(t.shape)
	hasTime := t.shape.Columns.CreatedAt != ""
	var after []any // the last row's key; nil before the first batch
	for {
		where, args := t.where, t.args
		if after != nil {
			if hasTime {
				where += fmt.Sprintf(" AND (%s) > ($%d, $%d)", key, len(args)+1, len(args)+2)
			} else {
				where += fmt.Sprintf(" AND %s > $%d", key, len(args)+1)
			}
			args = append(append([]any{}, args...), after...)
		}
		sql := "SELECT " + poller.EventColumns(t.shape) + ", " + key + " FROM " + t.shape.Ident() + " WHERE " + where +
			" ORDER BY " + key + fmt.Sprintf(" LIMIT %d", replayBatch)
		rows, err := pool.Query(ctx, sql, args...)
		if err != nil {
			return fmt.Errorf("read the rows to replay from %s: %w", t.shape.Qualified(), err)
		}
		var events []outbox.Event
		var at time.Time
		var id string
		read := 0
		for rows.Next() {
			read++
			extra := []any{&id}
			if hasTime {
				extra = []any{&at, &id}
			}
			ev, unpublishable, err := poller.ScanEvent(rows, t.shape, extra...)
			if err != nil {
				rows.Close()
				return fmt.Errorf("read a row to replay from %s: %w", t.shape.Qualified(), err)
			}
			if unpublishable != nil {
				p.skipped.Add(1)
				continue
			}
			ev.Table, ev.TopicTemplate = t.shape.Qualified(), t.topic
			if t.route != nil {
				ev.TopicTemplate = t.route.Topic(ev.AggregateType)
			}
			ev.Headers = append(ev.Headers, outbox.Header{Key: ReplayHeader, Value: p.opts.ID})
			events = append(events, ev)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read the rows to replay from %s: %w", t.shape.Qualified(), err)
		}
		for i := range events {
			if err := p.publish(ctx, snk, &events[i]); err != nil {
				return err
			}
		}
		if read < replayBatch {
			return nil
		}
		after = []any{id}
		if hasTime {
			after = []any{at, id}
		}
	}
}

// publish hands ev to the sink within the in-flight bound and the rate.
func (p *replayRun) publish(ctx context.Context, snk sink.Sink, ev *outbox.Event) error {
	if p.opts.Rate > 0 {
		if p.handed == 0 {
			p.paceFrom = time.Now()
		}
		due := p.paceFrom.Add(time.Duration(float64(p.handed) / p.opts.Rate * float64(time.Second)))
		if wait := time.Until(due); wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return ctx.Err()
			case <-timer.C:
			}
		}
	}
	select {
	case p.window <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := p.holdWhilePaused(ctx); err != nil {
		<-p.window
		return err
	}
	p.handed++
	p.inFlight.Add(1)
	id := ev.ID
	snk.Publish(ev, sink.DoneFunc(func(err error) {
		p.lastSettled.Store(time.Now().UnixNano())
		if err != nil {
			p.failed.Add(1)
			p.lastErr.Store(err.Error())
			p.failedMu.Lock()
			p.failedIDs = append(p.failedIDs, id)
			p.failedMu.Unlock()
		} else {
			p.sent.Add(1)
		}
		<-p.window
		p.inFlight.Done()
	}))
	p.report(false)
	return nil
}

// wait waits for every event handed to the sink to be settled.
func (p *replayRun) wait() { p.inFlight.Wait() }

// snapshot is the progress now.
func (p *replayRun) snapshot() ReplayProgress {
	pr := p.progress
	pr.Sent, pr.Failed, pr.Skipped = p.sent.Load(), p.failed.Load(), p.skipped.Load()
	if secs := time.Since(pr.StartedAt).Seconds(); secs > 0 {
		pr.Rate = float64(pr.Sent) / secs
	}
	if left := pr.Total - pr.Sent - pr.Failed - pr.Skipped; left > 0 && pr.Rate > 0 {
		pr.ETA = time.Duration(float64(left) / pr.Rate * float64(time.Second)).Round(time.Second).String()
	}
	if silent := p.silence(); silent > 0 && pr.Waiting == "" {
		pr.Waiting = ReplayWaitingBroker
		pr.Stalled = fmt.Sprintf("the broker has acknowledged none of the %d events in flight for %s (--ack-timeout %s)",
			len(p.window), silent.Round(time.Second), p.ackTimeout)
	}
	p.failedMu.Lock()
	pr.FailedIDs = slices.Clone(p.failedIDs[:min(len(p.failedIDs), MaxFailedIDs)])
	p.failedMu.Unlock()
	return pr
}

// silence is how long the broker has settled none of the events in flight, when
// that passed the ack timeout; 0 otherwise.
func (p *replayRun) silence() time.Duration {
	silent := time.Since(time.Unix(0, p.lastSettled.Load()))
	if p.ackTimeout <= 0 || len(p.window) == 0 || silent <= p.ackTimeout {
		return 0
	}
	return silent
}

// tick reports the progress every interval from a timer, so that lines come while
// nothing completes, and at once when the broker's silence passes the ack timeout;
// the returned func stops it.
func (p *replayRun) tick() (stop func()) {
	if p.opts.OnProgress == nil {
		return func() {}
	}
	step := p.interval()
	if p.ackTimeout > 0 {
		step = min(step, max(p.ackTimeout/4, 100*time.Millisecond))
	}
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		ticker := time.NewTicker(step)
		defer ticker.Stop()
		stalled := false
		for {
			select {
			case <-done:
				return
			case <-ticker.C:
				now := p.silence() > 0
				p.report(now && !stalled)
				stalled = now
			}
		}
	}()
	return func() { close(done); <-ended }
}

// interval is how often the progress is reported.
func (p *replayRun) interval() time.Duration {
	if p.opts.ProgressInterval > 0 {
		return p.opts.ProgressInterval
	}
	return 5 * time.Second
}

// report calls OnProgress when the interval passed since the last call.
func (p *replayRun) report(force bool) {
	if p.opts.OnProgress == nil {
		return
	}
	p.reportMu.Lock()
	defer p.reportMu.Unlock()
	if !force && time.Since(p.lastReport) < p.interval() {
		return
	}
	p.lastReport = time.Now()
	p.opts.OnProgress(p.snapshot())
}

// finish ends the replay with err and reports its last progress.
func (p *replayRun) finish(err error) (ReplayProgress, error) {
	if p.stopTicker != nil {
		p.stopTicker()
	}
	p.progress.Done = true
	if err != nil {
		p.progress.Error = err.Error()
	}
	pr := p.snapshot()
	pr.ETA, pr.Waiting, pr.Stalled = "", "", ""
	if p.opts.OnProgress != nil {
		p.reportMu.Lock()
		p.opts.OnProgress(pr)
		p.reportMu.Unlock()
	}
	p.failedMu.Lock()
	pr.FailedIDsAll = slices.Clone(p.failedIDs)
	p.failedMu.Unlock()
	return pr, err
}

// replayKey is the keyset a replay reads a table in: creation time (as the stream
// reads it), then id as text; id alone without a creation-time column.
func replayKey(s catalog.Shape) string {
	id := pgx.Identifier{s.Columns.ID}.Sanitize() + "::text"
	if s.Columns.CreatedAt == "" {
		return id
	}
	return replayCreatedAt(s) + ", " + id
}

// replayCreatedAt reads the creation time as a timestamptz; a timestamp without
// time zone is taken as UTC, as everywhere else.
func replayCreatedAt(s catalog.Shape) string {
	col := pgx.Identifier{s.Columns.CreatedAt}.Sanitize()
	if s.CreatedAtType == "timestamp" {
		return "(" + col + " AT TIME ZONE 'UTC')"
	}
	return col
}

// replayWhere is the filter as a WHERE clause on the table's columns, with its
// arguments. Rows with a NULL id or creation time are left out: they are no events.
func replayWhere(s catalog.Shape, f ReplayFilter) (string, []any) {
	conds := []string{pgx.Identifier{s.Columns.ID}.Sanitize() + " IS NOT NULL"}
	var args []any
	add := func(expr string, v any) {
		args = append(args, v)
		conds = append(conds, fmt.Sprintf(expr, len(args)))
	}
	if s.Columns.CreatedAt != "" {
		at := replayCreatedAt(s)
		conds = append(conds, at+" IS NOT NULL")
		if !f.Since.IsZero() {
			add(at+" >= $%d", f.Since)
		}
		if !f.Until.IsZero() {
			add(at+" < $%d", f.Until)
		}
	}
	col := func(name string) string { return pgx.Identifier{name}.Sanitize() + "::text" }
	if f.AggregateType != "" {
		add(col(s.Columns.AggregateType)+" = $%d", f.AggregateType)
	}
	if f.AggregateID != "" {
		add(col(s.Columns.AggregateID)+" = $%d", f.AggregateID)
	}
	if f.EventType != "" {
		add(col(s.Columns.EventType)+" = $%d", f.EventType)
	}
	if len(f.IDs) > 0 {
		add(col(s.Columns.ID)+" = ANY($%d)", f.IDs)
	}
	return strings.Join(conds, " AND "), args
}
