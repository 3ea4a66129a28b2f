package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
)

// tracedTable is an outbox table with a trace column, created once per test.
func tracedTable(t *testing.T, name string) {
	t.Helper()
	if _, err := exampleDB.Exec(`CREATE TABLE ` + name + ` (LIKE outbox_events INCLUDING ALL, traceparent text)`); err != nil {
		t.Fatal(err)
	}
}

// writeBoth writes one event through each driver with ctx and returns each row's
// trace column (NULL as "<null>"), pgx first.
func writeBoth(t *testing.T, ctx context.Context, w outbox.Writer) (pgxValue, sqlValue string) {
	t.Helper()
	conn := testenv.Connect(t, exampleURL)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a := outbox.Event{AggregateType: "order", AggregateID: "pgx", EventType: "order.created", Payload: []byte(`{}`)}
	if err := w.Write(ctx, tx, &a); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	stx, err := exampleDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := outbox.Event{AggregateType: "order", AggregateID: "sql", EventType: "order.created", Payload: []byte(`{}`)}
	if err := w.WriteSQL(ctx, stx, &b); err != nil {
		t.Fatal(err)
	}
	if err := stx.Commit(); err != nil {
		t.Fatal(err)
	}
	read := func(id string) string {
		var v sql.NullString
		if err := exampleDB.QueryRow(`SELECT traceparent FROM `+w.Table+` WHERE id = $1`, id).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if !v.Valid {
			return "<null>"
		}
		return v.String
	}
	return read(a.ID), read(b.ID)
}

// A span started before Write ends up in the row's trace column, as W3C
// traceparent, with both drivers.
func TestWriteStoresSpanContext(t *testing.T) {
	tracedTable(t, "traced_span")
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	ctx, span := tp.Tracer("test").Start(context.Background(), "checkout")
	defer span.End()
	sc := span.SpanContext()
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"

	got, gotSQL := writeBoth(t, ctx, outbox.Writer{Table: "traced_span", TraceColumn: outbox.DefaultTraceColumn})
	if got != want || gotSQL != want {
		t.Errorf("trace column: pgx %q, database/sql %q; want %q", got, gotSQL, want)
	}
}

// A span context with a tracestate is stored in the properties form, so the relay
// can hand on both headers.
func TestWriteStoresTraceState(t *testing.T) {
	tracedTable(t, "traced_state")
	state, err := trace.ParseTraceState("vendor=abc,other=x1")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled, TraceState: state, Remote: true,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	want := "traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\ntracestate=vendor=abc,other=x1"

	got, gotSQL := writeBoth(t, ctx, outbox.Writer{Table: "traced_state", TraceColumn: "traceparent"})
	if got != want || gotSQL != want {
		t.Errorf("trace column:\npgx %q\nsql %q\nwant %q", got, gotSQL, want)
	}
}

// Without a span context the column is NULL; without TraceColumn it is not written.
func TestWriteWithoutSpanContext(t *testing.T) {
	tracedTable(t, "traced_none")
	got, gotSQL := writeBoth(t, context.Background(), outbox.Writer{Table: "traced_none", TraceColumn: "traceparent"})
	if got != "<null>" || gotSQL != "<null>" {
		t.Errorf("trace column without a span: pgx %q, database/sql %q; want NULL", got, gotSQL)
	}

	tracedTable(t, "traced_off")
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "checkout")
	defer span.End()
	got, gotSQL = writeBoth(t, ctx, outbox.Writer{Table: "traced_off"})
	if got != "<null>" || gotSQL != "<null>" {
		t.Errorf("trace column without TraceColumn: pgx %q, database/sql %q; want NULL", got, gotSQL)
	}
}

// A trace column the table lacks, or a name that is no column, is an error that
// says what to do.
func TestWriteTraceColumnErrors(t *testing.T) {
	conn := testenv.Connect(t, exampleURL)
	ctx := context.Background()
	for _, tc := range []struct {
		column, want string
	}{
		{"traceparent", `ALTER TABLE "outbox_events" ADD COLUMN "traceparent" text`},
		{"trace parent", "is not a column name"},
	} {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			return outbox.Writer{TraceColumn: tc.column}.Write(ctx, tx,
				&outbox.Event{AggregateType: "order", AggregateID: "1", EventType: "order.created", Payload: []byte(`{}`)})
		})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("TraceColumn %q: error %v, want one saying %q", tc.column, err, tc.want)
		}
		if tc.column == "traceparent" {
			if _, ok := errors.AsType[*pgconn.PgError](err); !ok {
				t.Errorf("the error does not wrap PostgreSQL's: %v", err)
			}
		}
	}
}
