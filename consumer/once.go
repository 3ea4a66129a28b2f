package consumer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// DefaultTable is the dedup table `walrelay migrate` creates:
//
//	CREATE TABLE processed_events (
//	    event_id     UUID        PRIMARY KEY,
//	    processed_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
//	);
const DefaultTable = "processed_events"

// ErrInvalidEventID is wrapped by the errors for an event id that is missing or is
// not a UUID. Retrying cannot fix such a record: Run returns it at once.
var ErrInvalidEventID = errors.New("invalid event id")

// Dedup records processed event ids in a table. The zero value uses DefaultTable;
// Once, OnceSQL and CleanupProcessed are its methods on the zero value.
type Dedup struct {
	// Table is the dedup table, optionally schema-qualified ("app.processed_events"),
	// with the columns of DefaultTable.
	Table string
}

// Once runs fn inside tx only if eventID was not processed before, using
// DefaultTable; see Dedup.Once.
func Once(ctx context.Context, tx pgx.Tx, eventID string, fn func(ctx context.Context) error) (bool, error) {
	return Dedup{}.Once(ctx, tx, eventID, fn)
}

// OnceSQL is Once for a database/sql transaction; see Dedup.Once.
func OnceSQL(ctx context.Context, tx *sql.Tx, eventID string, fn func(ctx context.Context) error) (bool, error) {
	return Dedup{}.OnceSQL(ctx, tx, eventID, fn)
}

// Once records eventID in the dedup table inside tx (INSERT ... ON CONFLICT DO
// NOTHING) and runs fn only when that inserted a row. It returns (true, nil) when fn
// ran and succeeded, (false, nil) for a duplicate (fn did not run), and (false, err)
// when recording the id or fn failed; fn's error is returned unchanged.
//
// The caller owns tx: commit it when Once returns a nil error, roll it back
// otherwise, so that a failed fn leaves the id unrecorded and a later delivery
// runs fn again. fn must write its effects with the same tx; a nil fn only
// records the id.
//
// Two transactions racing on one id are safe at READ COMMITTED: the second INSERT
// waits for the first transaction, then sees a duplicate if it committed or runs
// fn if it rolled back. At REPEATABLE READ or SERIALIZABLE the second one fails
// with a serialization error instead (SQLSTATE 40001); retry it.
func (d Dedup) Once(ctx context.Context, tx pgx.Tx, eventID string, fn func(ctx context.Context) error) (bool, error) {
	if err := checkEventID(eventID); err != nil {
		return false, err
	}
	tag, err := tx.Exec(ctx, d.insertSQL(), eventID)
	if err != nil {
		return false, d.insertError(eventID, err)
	}
	return run(ctx, tag.RowsAffected(), fn)
}

// OnceSQL is Once for a database/sql transaction (for example with the
// github.com/jackc/pgx/v5/stdlib driver).
func (d Dedup) OnceSQL(ctx context.Context, tx *sql.Tx, eventID string, fn func(ctx context.Context) error) (bool, error) {
	if err := checkEventID(eventID); err != nil {
		return false, err
	}
	res, err := tx.ExecContext(ctx, d.insertSQL(), eventID)
	if err != nil {
		return false, d.insertError(eventID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("record event %s: rows affected: %w", eventID, err)
	}
	return run(ctx, n, fn)
}

func run(ctx context.Context, inserted int64, fn func(ctx context.Context) error) (bool, error) {
	if inserted == 0 {
		return false, nil
	}
	if fn != nil {
		if err := fn(ctx); err != nil {
			return false, err
		}
	}
	return true, nil
}

// checkEventID rejects ids the uuid column would refuse, before they abort the
// caller's transaction.
func checkEventID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty; pass the event's UUID (walrelay puts it in the record's \"id\" header)", ErrInvalidEventID)
	}
	var u pgtype.UUID
	if err := u.Scan(id); err != nil {
		return fmt.Errorf("%w: %q is not a UUID; walrelay puts the outbox row's UUID in the record's \"id\" header", ErrInvalidEventID, id)
	}
	return nil
}

func (d Dedup) table() string {
	if d.Table == "" {
		return DefaultTable
	}
	return d.Table
}

func (d Dedup) ident() string {
	return pgx.Identifier(strings.Split(d.table(), ".")).Sanitize()
}

func (d Dedup) insertSQL() string {
	return "INSERT INTO " + d.ident() + " (event_id) VALUES ($1) ON CONFLICT (event_id) DO NOTHING"
}

func (d Dedup) insertError(eventID string, err error) error {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "42P01" { // undefined_table
		return fmt.Errorf("record event %s: %w; run `walrelay migrate` on this database, or create it: "+
			"CREATE TABLE %s (event_id uuid PRIMARY KEY, processed_at timestamptz NOT NULL DEFAULT now())",
			eventID, err, d.ident())
	}
	return fmt.Errorf("record event %s in %s: %w", eventID, d.table(), err)
}
