package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/propagation"
)

// DefaultTable is the outbox table `walrelay migrate` creates.
const DefaultTable = "outbox_events"

// Writer inserts events into an outbox table inside the caller's transaction. The
// zero value writes to DefaultTable.
type Writer struct {
	// Table is the outbox table, optionally schema-qualified ("app.outbox_events").
	Table string
	// TraceColumn, when set, is a text column that each insert fills with the
	// trace context of the caller's ctx (TraceColumnValue), NULL when ctx carries
	// none, so that the relay can hand it on as the record's traceparent and
	// tracestate headers. Usually DefaultTraceColumn. It is a setting rather than
	// a lookup because the table's shape is the application's to know: an insert
	// naming a column the table lacks fails, and says so.
	TraceColumn string
	// Propagator injects the trace context; nil: the global propagator when it
	// writes traceparent, else W3C Trace Context.
	Propagator propagation.TextMapPropagator
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
	query, args, err := w.insert(ctx, e)
	if err != nil {
		return err
	}
	if err := tx.QueryRow(ctx, query, args...).Scan(&e.ID, &e.CreatedAt); err != nil {
		return w.insertError(err)
	}
	return nil
}

// WriteSQL inserts e with the caller's database/sql transaction.
func (w Writer) WriteSQL(ctx context.Context, tx *sql.Tx, e *Event) error {
	query, args, err := w.insert(ctx, e)
	if err != nil {
		return err
	}
	if err := tx.QueryRowContext(ctx, query, args...).Scan(&e.ID, &e.CreatedAt); err != nil {
		return w.insertError(err)
	}
	return nil
}

func (w Writer) insert(ctx context.Context, e *Event) (string, []any, error) {
	if err := validate(e); err != nil {
		return "", nil, err
	}
	ident := w.ident()
	// The payload goes as text so both drivers send it the same way; PostgreSQL
	// casts it to the column's json/jsonb type and rejects invalid JSON.
	cols := []string{"aggregate_type", "aggregate_id", "event_type", "payload"}
	args := []any{e.AggregateType, e.AggregateID, e.EventType, string(e.Payload)}
	if e.ID != "" {
		cols = append(cols, "id")
		args = append(args, e.ID)
	}
	if w.TraceColumn != "" {
		if !columnName.MatchString(w.TraceColumn) {
			return "", nil, fmt.Errorf("outbox writer: TraceColumn %q is not a column name (letters, digits, _ and $, not starting with a digit)", w.TraceColumn)
		}
		cols = append(cols, pgx.Identifier{w.TraceColumn}.Sanitize())
		var trace any // NULL without a span context
		if v := TraceColumnValue(ctx, w.Propagator); v != "" {
			trace = v
		}
		args = append(args, trace)
	}
	var b strings.Builder
	b.WriteString("INSERT INTO " + ident + " (" + strings.Join(cols, ", ") + ") VALUES (")
	for i := range args {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "$%d", i+1)
	}
	b.WriteString(") RETURNING id::text, created_at")
	return b.String(), args, nil
}

func (w Writer) insertError(err error) error {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "42703" && w.TraceColumn != "" { // undefined_column
		return fmt.Errorf("insert outbox event: %w; the Writer's TraceColumn is %q: add it "+
			"(ALTER TABLE %s ADD COLUMN %s text) or leave TraceColumn empty", err, w.TraceColumn, w.ident(), pgx.Identifier{w.TraceColumn}.Sanitize())
	}
	return fmt.Errorf("insert outbox event: %w", err)
}

func (w Writer) ident() string {
	table := w.Table
	if table == "" {
		table = DefaultTable
	}
	return pgx.Identifier(strings.Split(table, ".")).Sanitize()
}
