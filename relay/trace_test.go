package relay_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/relay"
)

// With a TracerProvider, every published event gets exactly one producer span,
// from its commit to the broker's ack (exactly once: to its Kafka transaction's
// commit), with the hand-over marked in between. Rows written with a trace column
// carry the writer's span context; once the relay turns that column into headers,
// each such event's span is the writer's child (checked for every record that
// arrives with a traceparent header), and so is a table-less event's whose
// headers carry it.
func TestRelaySpanPerEvent(t *testing.T) {
	t.Parallel()
	for _, delivery := range []relay.Delivery{relay.AtLeastOnce, relay.ExactlyOnce} {
		t.Run(string(delivery), func(t *testing.T) {
			t.Parallel()
			testSpanPerEvent(t, delivery)
		})
	}
}

// tracedOutbox is a migrated database whose outbox table has a trace column, its
// broker, and a tracer provider that records the relay's spans.
func tracedOutbox(t *testing.T) (dbURL string, broker *kfake.Cluster, conn *pgx.Conn, spans *tracetest.SpanRecorder, tp *sdktrace.TracerProvider) {
	dbURL, broker, conn = outboxWithBroker(t)
	if _, err := conn.Exec(context.Background(), "ALTER TABLE outbox_events ADD COLUMN traceparent text"); err != nil {
		t.Fatal(err)
	}
	spans = tracetest.NewSpanRecorder()
	return dbURL, broker, conn, spans, sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
}

func testSpanPerEvent(t *testing.T, delivery relay.Delivery) {
	dbURL, broker, conn, spans, tp := tracedOutbox(t)
	ctx := context.Background()
	rn := start(t, dbURL, broker, "traced_"+strings.ReplaceAll(string(delivery), "-", "_"), func(c *config) {
		c.TracerProvider = tp
		c.Delivery = delivery
	})
	if !rn.waitLog(time.Minute, "msg=streaming") { // the events are the stream's, not a catch-up pass's
		t.Fatal("the relay did not stream")
	}
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`, kgo.FetchIsolationLevel(kgo.ReadCommitted()))

	// Half the events are written inside a span of the application's.
	writer := sdktrace.NewTracerProvider().Tracer("app")
	w := outbox.Writer{TraceColumn: outbox.DefaultTraceColumn}
	writerSpan := map[string]trace.SpanContext{}
	createdAt := map[string]time.Time{}
	for i := range 10 {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for j := range 4 {
			wctx, span := writer.Start(ctx, "checkout")
			if j%2 == 1 {
				wctx = ctx
			}
			ev := outbox.Event{AggregateType: "order", AggregateID: aggregates("o", 3)[j%3], EventType: "order.created",
				Payload: []byte(`{"n": 1}`)}
			if err := w.Write(wctx, tx, &ev); err != nil {
				t.Fatal(err)
			}
			span.End()
			if j%2 == 0 {
				writerSpan[ev.ID] = span.SpanContext()
			}
			createdAt[ev.ID] = ev.CreatedAt
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	// Table-less events carry the writer's context in their headers.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		wctx, span := writer.Start(ctx, "checkout")
		ev := outbox.Event{AggregateType: "order", AggregateID: "emitted", EventType: "order.created", Payload: []byte(`{"n": 2}`),
			Headers: []outbox.Header{{Key: outbox.TraceParentHeader, Value: outbox.TraceColumnValue(wctx, nil)}}}
		if err := outbox.Emit(ctx, tx, &ev); err != nil {
			t.Fatal(err)
		}
		span.End()
		writerSpan[ev.ID] = span.SpanContext()
		createdAt[ev.ID] = ev.CreatedAt
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if !consumer.WaitDistinct(time.Minute, len(createdAt)) {
		t.Fatalf("delivered %d distinct of %d events", consumer.Distinct(), len(createdAt))
	}
	// A span ends at the ack, which the producer may learn after the consumer read
	// the record.
	testenv.WaitFor(t, 30*time.Second, "a span per event", func() bool { return len(spans.Ended()) >= len(createdAt) })

	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans.Ended() {
		id := attr(s, "messaging.message.id")
		if _, dup := byID[id]; dup {
			t.Errorf("event %s has two spans", id)
		}
		byID[id] = s
	}
	if len(byID) != len(createdAt) {
		t.Errorf("%d spans for %d events", len(byID), len(createdAt))
	}
	for id, created := range createdAt {
		s, ok := byID[id]
		if !ok {
			t.Errorf("event %s has no span", id)
			continue
		}
		handed := s.Events()
		if s.SpanKind() != trace.SpanKindProducer || attr(s, "messaging.system") != "kafka" || len(handed) != 1 {
			t.Errorf("event %s: span %q kind %s, %d events, attributes %v", id, s.Name(), s.SpanKind(), len(handed), s.Attributes())
			continue
		}
		// created_at is the transaction's start: the commit, where the span starts,
		// is not before it.
		if s.StartTime().Before(created.Truncate(time.Microsecond)) || handed[0].Time.Before(s.StartTime()) || s.EndTime().Before(handed[0].Time) {
			t.Errorf("event %s: created %s, span %s, handed over %s, ended %s: want them in that order",
				id, created, s.StartTime(), handed[0].Time, s.EndTime())
		}
	}

	parented := map[string]bool{}
	for _, rec := range consumer.Records {
		id := testenv.Header(rec, "id")
		if testenv.Header(rec, "traceparent") == "" {
			continue
		}
		parented[id] = true
		if s, ok := byID[id]; ok && !s.Parent().Equal(writerSpan[id].WithRemote(true)) {
			t.Errorf("event %s: relay span's parent %v, want the writer's %v", id, s.Parent(), writerSpan[id])
		}
	}
	if len(parented) != len(writerSpan) {
		t.Errorf("%d events carried a traceparent header, %d were written in a span", len(parented), len(writerSpan))
	}
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// An event the broker refuses once is published again by the poller, which gives
// that attempt a span of its own: the event has the stream's span, with the
// broker's error, and the poller's, both children of the writer's span.
func TestPollerRetryHasItsOwnSpan(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn, spans, tp := tracedOutbox(t)
	ctx := context.Background()
	refuse := broker.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "outbox.event.flaky", Err: kerr.InvalidRecord})
	rn := start(t, dbURL, broker, "traced_retry", fastRetries, func(c *config) { c.TracerProvider = tp })
	if !rn.waitLog(time.Minute, "msg=streaming") {
		t.Fatal("the relay did not stream")
	}
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)

	wctx, span := sdktrace.NewTracerProvider().Tracer("app").Start(ctx, "checkout")
	ev := outbox.Event{AggregateType: "flaky", AggregateID: "f", EventType: "once", Payload: []byte(`{"n": 1}`)}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := (outbox.Writer{TraceColumn: outbox.DefaultTraceColumn}).Write(wctx, tx, &ev); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	span.End()
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(ev.ID) > 0 }) {
		t.Fatal("the refused event was not published again")
	}
	if refuse.Hits() != 1 {
		t.Fatalf("the broker refused %d produce requests, want 1", refuse.Hits())
	}
	byPublisher := map[string]sdktrace.ReadOnlySpan{}
	testenv.WaitFor(t, 30*time.Second, "the stream's and the poller's spans", func() bool {
		for _, s := range spans.Ended() {
			if attr(s, "messaging.message.id") == ev.ID {
				byPublisher[attr(s, "walrelay.publisher")] = s
			}
		}
		return len(byPublisher) == 2
	})
	streamed, polled := byPublisher["stream"], byPublisher["poller"]
	if streamed == nil || polled == nil {
		t.Fatalf("spans by publisher: %v, want stream and poller", byPublisher)
	}
	if streamed.Status().Code != codes.Error || polled.Status().Code == codes.Error {
		t.Errorf("stream span status %v, poller span status %v; want the broker's error, then none", streamed.Status(), polled.Status())
	}
	for name, s := range byPublisher {
		if !s.Parent().Equal(span.SpanContext().WithRemote(true)) || s.SpanKind() != trace.SpanKindProducer {
			t.Errorf("%s span: parent %v kind %s, want a producer span, child of the writer's %v", name, s.Parent(), s.SpanKind(), span.SpanContext())
		}
	}
	if !polled.StartTime().After(streamed.StartTime()) {
		t.Errorf("the poller's span starts %s, not after the stream's %s", polled.StartTime(), streamed.StartTime())
	}
}
