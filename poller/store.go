package poller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/outbox"
)

// Store runs the bookkeeping SQL on the outbox table. Each method is one committed
// statement, or a transaction when it takes a tx.
type Store struct {
	pool      *pgxpool.Pool
	table     string // sanitized identifier
	qualified string // schema.name, as outbox.Event.Table names it
	cols      columns
	policy    Policy
	// record is RecordFailures' statement, built once for the table's shape.
	record string
	// rewrite are the placed columns an event's row is written with again.
	rewrite []rewritten
}

// NewStore returns a store for the outbox table of the given shape (read with
// catalog.DescribeTable; catalog.DefaultShape for walrelay's own table).
func NewStore(pool *pgxpool.Pool, shape catalog.Shape, policy Policy) *Store {
	s := &Store{pool: pool, table: shape.Ident(), qualified: shape.Qualified(), cols: columnsOf(shape), policy: policy,
		rewrite: rewrittenColumns(shape)}
	s.record = s.recordFailureSQL()
	return s
}

// recordFailureSQL is the upsert of one failed attempt. Parameters: $1 id, $2
// aggregate type, $3 aggregate id, $4 event type, $5 payload, $6 last error, $7
// backoff min, $8 backoff max (seconds), $9 max attempts, then rowTail's from $10.
// The conflict target is the table's unique key on id.
func (s *Store) recordFailureSQL() string {
	names, values := s.rowColumns(10)
	// OVERRIDING SYSTEM VALUE: the row keeps its id also when the column is
	// GENERATED ALWAYS AS IDENTITY (it changes nothing for other columns).
	return `INSERT INTO ` + s.table + ` AS o (` + names + `, attempts, last_error, retry_after, dead_lettered_at)
			OVERRIDING SYSTEM VALUE VALUES (` + values + `, 1, $6,
				now() + make_interval(secs => $7::float8 * (0.5 + random() / 2)),
				CASE WHEN 1 >= $9 THEN now() END)
			ON CONFLICT (` + s.conflictKey() + `) DO UPDATE SET
				attempts = o.attempts + 1,
				last_error = EXCLUDED.last_error,
				retry_after = now() + make_interval(secs =>
					least($8::float8, $7::float8 * power(2, o.attempts)) * (0.5 + random() / 2)),
				dead_lettered_at = CASE WHEN o.attempts + 1 >= $9 THEN now() END
			RETURNING attempts, dead_lettered_at IS NOT NULL, extract(epoch FROM retry_after - now())::float8`
}

// rowColumns are the column list and the values of an event's row in an INSERT:
// $1 id, $2 aggregate type, $3 aggregate id, $4 event type, $5 payload (text, cast
// to the column's type; bytes for bytea), then rowTail's values from $from on.
func (s *Store) rowColumns(from int) (names, values string) {
	c := s.cols
	payload := "$5::text::" + c.shape.PayloadType // jsonb, json: parsed from the published text
	switch c.shape.PayloadType {
	case "text":
		payload = "$5::text"
	case "bytea":
		payload = "$5::bytea"
	}
	names = c.id + ", " + c.aggType + ", " + c.aggID + ", " + c.eventType + ", " + c.payload
	values = "$1, $2, $3, $4, " + payload
	if c.eventType == "" {
		// No event type column: $4 is still given, and typed here, as PostgreSQL
		// cannot prepare a statement with a parameter it never sees.
		names = c.id + ", " + c.aggType + ", " + c.aggID + ", " + c.payload
		values = "$1, $2, $3, CASE WHEN $4::text IS NULL THEN " + payload + " ELSE " + payload + " END"
	}
	switch {
	case c.createdAt == "":
	case c.shape.CreatedAtType == "timestamp":
		names += ", " + c.createdAt
		values += fmt.Sprintf(", ($%d::timestamptz AT TIME ZONE 'UTC')", from)
		from++
	default:
		names += ", " + c.createdAt
		values += fmt.Sprintf(", $%d::timestamptz", from)
		from++
	}
	for _, r := range s.rewrite {
		names += ", " + r.name
		values += fmt.Sprintf(", $%d::text::%s", from, r.typ)
		from++
	}
	return names, values
}

// rowTail are the row's values after the payload, in rowColumns' order: the
// creation time when the table has the column, then the placed columns'.
func (s *Store) rowTail(e *outbox.Event) []any {
	var args []any
	if s.cols.createdAt != "" {
		args = append(args, e.CreatedAt)
	}
	for _, r := range s.rewrite {
		args = append(args, r.value(e))
	}
	return args
}

// payloadArg is e's payload as rowColumns' $5 takes it; NULL for a tombstone.
func (s *Store) payloadArg(e *outbox.Event) any {
	switch {
	case e.NullPayload:
		return nil
	case s.cols.shape.PayloadType == "bytea":
		return e.Payload
	}
	return string(e.Payload)
}

// conflictKey is the table's unique key on id, quoted, as an ON CONFLICT target.
func (s *Store) conflictKey() string {
	key := make([]string, len(s.cols.shape.Key))
	for i, k := range s.cols.shape.Key {
		key[i] = ident(k)
	}
	return strings.Join(key, ", ")
}

// Failure is one event's failed attempt.
type Failure struct {
	Event *outbox.Event
	Err   error
	// NullID marks a row whose id column is NULL (an adopted table's id may be
	// nullable): it has no id to be found by (DeadLetter).
	NullID bool
	// Position is the row's ctid when the caller holds the row locked (the poller).
	Position string
	// Version is the row as a statement that does not hold it read it (the catch-up
	// pass): what finds a row with a NULL id.
	Version RowVersion
	// Xid is the top-level xid of the transaction that inserted a row with a NULL id
	// (the stream's). Later marks a look-up after that transaction was seen finished
	// and its rows were not found by their xmin: then a subtransaction inserted them.
	Xid   uint32
	Later bool
	// Final: no retry can fix it (sink.IsFinal); this attempt makes it a dead letter.
	Final bool
}

// RecordFailures counts one failed attempt for each row and schedules its retry
// with exponential backoff and jitter, or makes it a dead letter at MaxAttempts; it
// returns the rows that became dead letters, to be logged once q commits. A
// row that no longer exists (the application deleted it, --on-publish none) is
// inserted again so that the poller owns it. That insert goes through the
// publication; it always sets retry_after, which is how the stream tells it from
// an application's insert and leaves it to the poller (decoder.KindHandedOver):
// streaming it would be an extra attempt at once, ignoring the backoff.
// due is when the rows it scheduled for a retry are due again.
func (s *Store) RecordFailures(ctx context.Context, q querier, failures []Failure) (dead []DeadLettered, due RetryWindow, err error) {
	if len(failures) == 0 {
		return nil, RetryWindow{}, nil
	}
	batch := &pgx.Batch{}
	for _, f := range failures {
		maxAttempts := s.policy.MaxAttempts
		if f.Final {
			maxAttempts = 0 // a dead letter at this attempt, whatever came before
		}
		args := []any{f.Event.ID, f.Event.AggregateType, f.Event.AggregateID, f.Event.EventType, s.payloadArg(f.Event),
			truncate(f.Err.Error(), 2000), s.policy.BackoffMin.Seconds(), s.policy.BackoffMax.Seconds(), maxAttempts}
		batch.Queue(s.record, append(args, s.rowTail(f.Event)...)...).QueryRow(func(row pgx.Row) error {
			var attempts int
			var isDead bool
			var backoff float64
			if err := row.Scan(&attempts, &isDead, &backoff); err != nil {
				return err
			}
			if isDead {
				dead = append(dead, DeadLettered{Event: f.Event, Table: s.qualified, Attempts: attempts, Err: f.Err, Final: f.Final})
			} else {
				due = due.add(time.Duration(backoff * float64(time.Second)))
			}
			return nil
		})
	}
	if err := q.SendBatch(ctx, batch).Close(); err != nil {
		return nil, RetryWindow{}, fmt.Errorf("record failed attempts: %w", err)
	}
	return dead, due, nil
}

// RetryWindow is when the rows scheduled for a retry are due, counted from the
// start of the transaction that scheduled them, on the server's clock: the first
// and the last. Zero: none was scheduled.
type RetryWindow struct{ First, Last time.Duration }

// add widens the window to a row due in d (at least a nanosecond: a row due at
// once was still scheduled).
func (w RetryWindow) add(d time.Duration) RetryWindow {
	d = max(d, time.Nanosecond)
	if w.First == 0 || d < w.First {
		w.First = d
	}
	w.Last = max(w.Last, d)
	return w
}

// DeadLetter makes rows dead letters at once, with the failure as the reason: rows
// that can never become events. It reports, by index, the rows it found: a row
// committed a moment ago may not be visible yet (see Published). A row is found by
// its position when the caller holds it, else by its id. A row with a NULL id is
// found as itself, never through another such row (docs/design.md invariant 2):
// by its version when it was read from the table, else as a row of its transaction
// (nullIDOfTransaction).
func (s *Store) DeadLetter(ctx context.Context, q querier, rows []Failure) ([]bool, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	set := "UPDATE " + s.table + " SET attempts = attempts + 1, last_error = $1, retry_after = NULL, dead_lettered_at = now() WHERE "
	batch := &pgx.Batch{}
	partitioned := s.cols.shape.Partitioned
	found := make([]bool, len(rows))
	for i, f := range rows {
		reason := truncate(f.Err.Error(), 2000)
		switch {
		case f.Position != "" && !partitioned: // positions repeat across partitions
			batch.Queue(set+"ctid = $2::tid", reason, f.Position)
		case !f.NullID:
			batch.Queue(set+s.cols.id+" = $2", reason, f.Event.ID)
		case f.Version.Position != "" && partitioned:
			batch.Queue(set+"ctid = $2::tid AND xmin = $3::bigint::text::xid AND tableoid = $4::bigint::oid", reason,
				f.Version.Position, int64(f.Version.Xmin), int64(f.Version.Table))
		case f.Version.Position != "":
			batch.Queue(set+"ctid = $2::tid AND xmin = $3::bigint::text::xid", reason, f.Version.Position, int64(f.Version.Xmin))
		case f.Position != "":
			// The poller holds it, in one of the partitions.
			batch.Queue(set+"ctid = $2::tid AND "+s.cols.id+" IS NULL AND dead_lettered_at IS NULL", reason, f.Position)
		case f.Xid != 0:
			batch.Queue(s.nullIDOfTransaction(), reason, int64(f.Xid), f.Later).QueryRow(func(row pgx.Row) error {
				var n int64
				err := row.Scan(&n)
				found[i] = n > 0 || f.Later
				return err
			})
			continue
		default:
			// Nothing names the row: it stays not found (the bookkeeping is given no
			// such row: each comes with a position, a version or a transaction).
			batch.Queue(set+"false", reason)
		}
		batch.QueuedQueries[len(batch.QueuedQueries)-1].Exec(func(tag pgconn.CommandTag) error {
			found[i] = tag.RowsAffected() > 0
			return nil
		})
	}
	if err := q.SendBatch(ctx, batch).Close(); err != nil {
		return nil, fmt.Errorf("dead-letter %d unpublishable rows: %w", len(rows), err)
	}
	return found, nil
}

// nullIDOfTransaction dead-letters a row with a NULL id that the stream delivered,
// as a row of its transaction ($2, its top-level xid): one row with a NULL id, not a
// dead letter yet, whose xmin is that xid. A row a subtransaction inserted has the
// subtransaction's xid, which is newer than its top level's and which no statement
// can tell apart from a later transaction's. So with $3 (Later: the transaction was
// seen finished before, and its rows were not found by their xmin) it dead-letters
// every row with a NULL id inserted by that transaction or a newer one that neither
// is a dead letter nor was handed to the poller: those all come to it as dead
// letters anyway, and the transaction's own rows are among them. It returns the
// number of rows it changed.
func (s *Store) nullIDOfTransaction() string {
	set := "attempts = o.attempts + 1, last_error = $1, retry_after = NULL, dead_lettered_at = now()"
	nullID := func(alias string) string {
		return alias + "." + s.cols.id + " IS NULL AND " + alias + ".dead_lettered_at IS NULL"
	}
	return `WITH own AS (
			UPDATE ` + s.table + ` AS o SET ` + set + `
			WHERE (o.tableoid, o.ctid) = (SELECT r.tableoid, r.ctid FROM ` + s.table + ` AS r
				WHERE ` + nullID("r") + ` AND r.xmin = $2::bigint::text::xid LIMIT 1)
			RETURNING 1
		), later AS (
			UPDATE ` + s.table + ` AS o SET ` + set + `
			WHERE $3 AND NOT EXISTS (SELECT FROM own) AND ` + nullID("o") + ` AND o.retry_after IS NULL
				AND (o.xmin::text::bigint - $2 + 4294967296) % 4294967296 < 2147483648
			RETURNING 1
		)
		SELECT (SELECT count(*) FROM own) + (SELECT count(*) FROM later)`
}

// PublishedEarlier applies the --on-publish mode to rows an earlier exactly-once
// session covered with its Kafka position, leaving alone the rows it handed to the
// poller or the dead letters instead: those were never produced. It reports the rows
// it found, changed or left alone.
func (s *Store) PublishedEarlier(ctx context.Context, q querier, mode OnPublish, ids []string) (Found, error) {
	if len(ids) == 0 {
		return Found{}, nil
	}
	ours := " WHERE " + s.idIn() + " AND retry_after IS NULL AND dead_lettered_at IS NULL"
	change := "UPDATE " + s.table + " SET processed_at = now()" + ours + " AND processed_at IS NULL"
	if mode == Delete {
		change = "DELETE FROM " + s.table + ours
	}
	// Both parts of the statement see one snapshot: a row seen is a row handled.
	rows, err := q.Query(ctx, "WITH changed AS ("+change+" RETURNING 1) SELECT "+s.cols.id+"::text FROM "+s.table+
		" WHERE "+s.idIn(), idArray(ids))
	if err == nil {
		var seen []string
		if seen, err = pgx.CollectRows(rows, pgx.RowTo[string]); err == nil {
			return foundOf(seen), nil
		}
	}
	return Found{}, fmt.Errorf("record %d rows published by an earlier session (%s): %w", len(ids), mode, err)
}

// Published applies the --on-publish mode to acked rows and reports the ids it found.
// A row can be missing for a moment: logical decoding streams a transaction as soon
// as its commit is in the WAL, a little before other sessions see its rows.
//
// None marks like Mark: only rows handed over to the poller get here in that mode,
// and such a row may be one the application kept, which walrelay must not delete.
// Progress marks like Mark too: only rows of the poller and of a catch-up pass get
// here, which the published horizon does not cover.
//
// Marking checks the row count first and asks which rows are marked only when some
// are missing: reading every id back cost the relay a tenth of its CPU.
func (s *Store) Published(ctx context.Context, q querier, mode OnPublish, ids []string) (Found, error) {
	if len(ids) == 0 {
		return Found{}, nil
	}
	arr, in := idArray(ids), s.idIn()
	var rows pgx.Rows
	var err error
	switch mode {
	case Mark, None, Progress:
		var tag pgconn.CommandTag
		tag, err = q.Exec(ctx, "UPDATE "+s.table+" SET processed_at = now(), retry_after = NULL WHERE "+in, arr)
		if err == nil && tag.RowsAffected() == int64(len(ids)) {
			return Found{all: true}, nil
		}
		if err == nil {
			rows, err = q.Query(ctx, "SELECT "+s.cols.id+"::text FROM "+s.table+" WHERE "+in+" AND processed_at IS NOT NULL", arr)
		}
	case Delete:
		rows, err = q.Query(ctx, "DELETE FROM "+s.table+" WHERE "+in+" RETURNING "+s.cols.id+"::text", arr)
	default:
		return Found{}, fmt.Errorf("record %d published rows: unknown on-publish mode %q", len(ids), mode)
	}
	if err != nil {
		return Found{}, fmt.Errorf("record %d published rows (%s): %w", len(ids), mode, err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return Found{}, fmt.Errorf("record %d published rows (%s): %w", len(ids), mode, err)
	}
	return foundOf(found), nil
}

// PublishedLocked applies the --on-publish mode to acked rows that tx selected and
// holds locked, found by their positions (ctid): a row cannot move while it is
// locked, and the position spares a primary-key look-up per row (about a quarter of
// the mark's cost). Should the count differ all the same, the ids decide. A
// partitioned table's positions repeat across its partitions: there the ids do.
func (s *Store) PublishedLocked(ctx context.Context, tx pgx.Tx, mode OnPublish, ids, positions []string) error {
	if len(ids) == 0 {
		return nil
	}
	if s.cols.shape.Partitioned {
		_, err := s.Published(ctx, tx, mode, ids)
		return err
	}
	sql := "UPDATE " + s.table + " SET processed_at = now(), retry_after = NULL WHERE ctid = ANY($1::tid[])"
	if mode == Delete {
		sql = "DELETE FROM " + s.table + " WHERE ctid = ANY($1::tid[])"
	}
	tag, err := tx.Exec(ctx, sql, idArray(positions))
	if err != nil {
		return fmt.Errorf("record %d published rows (%s): %w", len(ids), mode, err)
	}
	if tag.RowsAffected() != int64(len(positions)) {
		_, err = s.Published(ctx, tx, mode, ids)
	}
	return err
}

// Found tells which rows a statement of the bookkeeping found.
type Found struct {
	all bool
	ids map[string]bool
}

func foundOf(ids []string) Found {
	f := Found{ids: make(map[string]bool, len(ids))}
	for _, id := range ids {
		f.ids[id] = true
	}
	return f
}

// Has reports whether the row with id was found.
func (f Found) Has(id string) bool { return f.all || f.ids[id] }

// idIn is the condition "id is one of the array $1", with the array cast to the id
// column's own type so that the primary-key index serves it.
func (s *Store) idIn() string {
	return s.cols.id + " = ANY($1::" + s.cols.shape.IDType + "[])"
}

// querier is what both a pool and a transaction offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// DeleteProcessed deletes rows processed before the cutoff, batchSize at a time,
// and returns how many it deleted. Pending and dead-letter rows have no
// processed_at and are never touched.
func (s *Store) DeleteProcessed(ctx context.Context, olderThan time.Duration, batchSize int) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, "DELETE FROM "+s.table+" WHERE "+s.cols.id+" IN (SELECT "+s.cols.id+" FROM "+s.table+
			" WHERE processed_at < now() - make_interval(secs => $1::float8) LIMIT $2)", olderThan.Seconds(), batchSize)
		if err != nil {
			return total, fmt.Errorf("delete processed rows: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batchSize) {
			return total, nil
		}
	}
}

// ErrNoCreationTime: the table has no creation time column, so retirement cannot
// tell a row's age.
var ErrNoCreationTime = errors.New("the outbox table has no creation time column: retire its published rows by partition or by hand")

// retireAge is the xid age at which DeletePublished retires a published row whatever
// its creation time: walrelay_full_xid reads a row's 32-bit xmin exactly only while
// the row is younger than about 2^32 xids, and a published row must never grow older
// (docs/design.md invariant 10).
const retireAge = 3 << 30

// DeletePublished retires rows created before the cutoff that the published horizon
// covers (--on-publish progress, docs/design.md invariant 10): not marked, not handed
// over, not dead letters, inserted below the horizon of the slot that streams the
// table. It deletes batchSize at a time, each batch found through the pending index's
// creation time, and returns how many it deleted. Then it retires, among the oldest
// rows by creation time, the published ones older than retireAge xids, however young
// their creation time. Marked rows are DeleteProcessed's.
func (s *Store) DeletePublished(ctx context.Context, olderThan time.Duration, batchSize int) (int64, error) {
	c := s.cols
	if c.createdAt == "" {
		return 0, ErrNoCreationTime
	}
	cutoff := "now() - make_interval(secs => $3::float8)"
	if c.shape.CreatedAtType == "timestamp" {
		cutoff = "((" + cutoff + ") AT TIME ZONE 'UTC')"
	}
	const plain = "processed_at IS NULL AND retry_after IS NULL AND dead_lettered_at IS NULL"
	published := catalog.BelowHorizon("$1::text")
	byTime := "DELETE FROM " + s.table + " WHERE " + c.id + " IN (SELECT " + c.id + " FROM " + s.table +
		" WHERE " + c.createdAt + " < " + cutoff + " AND " + plain + " AND " + published + " LIMIT $2)"
	byAge := "DELETE FROM " + s.table + " WHERE " + c.id + " IN (SELECT " + c.id + " FROM (SELECT " + c.id + ", xmin FROM " +
		s.table + " WHERE " + plain + " ORDER BY " + c.createdAt + " LIMIT $2) oldest WHERE " + published +
		" AND " + catalog.OlderThanXids(retireAge) + ")"
	var total int64
	retire := func(sql string, args ...any) error {
		for {
			tag, err := s.pool.Exec(ctx, sql, args...)
			if err != nil {
				return fmt.Errorf("delete published rows: %w", err)
			}
			total += tag.RowsAffected()
			if tag.RowsAffected() < int64(batchSize) {
				return nil
			}
		}
	}
	if err := retire(byTime, s.table, batchSize, olderThan.Seconds()); err != nil {
		return total, err
	}
	return total, retire(byAge, s.table, batchSize)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
