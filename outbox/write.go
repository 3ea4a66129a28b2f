package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// DefaultTable is the outbox table `walrelay migrate` creates.
const DefaultTable = "outbox_events"

// Writer inserts events into an outbox table inside the caller's transaction. The
// zero value writes to DefaultTable.
type Writer struct {
	// Table is the outbox table, optionally schema-qualified ("app.outbox_events").
	Table string
}

// Write inserts e with the caller's pgx transaction. An empty e.ID is filled with the
// UUID PostgreSQL generates, and e.CreatedAt with the row's created_at.
func Write(ctx context.Context, tx pgx.Tx, e *Event) error { return Writer{}.Write(ctx, tx, e) }

// WriteSQL inserts e with the caller's database/sql transaction; see Write.
func WriteSQL(ctx context.Context, tx *sql.Tx, e *Event) error {
	return Writer{}.WriteSQL(ctx, tx, e)
}

// Write inserts e with the caller's pgx transaction; see the package function Write.
func (w Writer) Write(ctx context.Context, tx pgx.Tx, e *Event) error {
	query, args, err := w.insert(e)
	if err != nil {
		return err
	}
	if err := tx.QueryRow(ctx, query, args...).Scan(&e.ID, &e.CreatedAt); err != nil {
		return fmt.Errorf("insert outbox event: %w", err)
	}
	return nil
}

// WriteSQL inserts e with the caller's database/sql transaction.
func (w Writer) WriteSQL(ctx context.Context, tx *sql.Tx, e *Event) error {
	query, args, err := w.insert(e)
	if err != nil {
		return err
	}
	if err := tx.QueryRowContext(ctx, query, args...).Scan(&e.ID, &e.CreatedAt); err != nil {
		return fmt.Errorf("insert outbox event: %w", err)
	}
	return nil
}

func (w Writer) insert(e *Event) (string, []any, error) {
	if e.AggregateType == "" || e.AggregateID == "" || e.EventType == "" {
		return "", nil, errors.New("outbox event needs AggregateType, AggregateID and EventType")
	}
	if len(e.Payload) == 0 {
		return "", nil, errors.New("outbox event needs a JSON Payload")
	}
	table := w.Table
	if table == "" {
		table = DefaultTable
	}
	ident := pgx.Identifier(strings.Split(table, ".")).Sanitize()
	// The payload goes as text so both drivers send it the same way; PostgreSQL
	// casts it to the column's json/jsonb type and rejects invalid JSON.
	payload := string(e.Payload)
	if e.ID == "" {
		return "INSERT INTO " + ident + " (aggregate_type, aggregate_id, event_type, payload)" +
				" VALUES ($1, $2, $3, $4) RETURNING id::text, created_at",
			[]any{e.AggregateType, e.AggregateID, e.EventType, payload}, nil
	}
	return "INSERT INTO " + ident + " (id, aggregate_type, aggregate_id, event_type, payload)" +
			" VALUES ($1, $2, $3, $4, $5) RETURNING id::text, created_at",
		[]any{e.ID, e.AggregateType, e.AggregateID, e.EventType, payload}, nil
}
