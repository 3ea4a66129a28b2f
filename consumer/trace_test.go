package consumer_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/walrelay/walrelay/consumer"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/sink/kafka"
)

// writerSpan is a span context as a writer's span would put it in the outbox row,
// with a tracestate, and the headers the relay makes of it.
func writerSpan(t *testing.T, i int) (trace.SpanContext, []kgo.RecordHeader) {
	t.Helper()
	state, err := trace.ParseTraceState("vendor=w1")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0xaa, byte(i), 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:     trace.SpanID{0xbb, byte(i), 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled, TraceState: state, Remote: true,
	})
	return sc, []kgo.RecordHeader{
		{Key: "traceparent", Value: []byte("00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01")},
		{Key: "tracestate", Value: []byte("vendor=w1")},
	}
}

// A record with traceparent and tracestate headers: the Handler's ctx carries the
// consumer span, and that span is a child of the writer's span, ended after the
// record's transaction committed. A record without them gets a span of a new trace.
func TestRunContinuesTheWritersTrace(t *testing.T) {
	t.Parallel()
	const traced = 6
	pool := counterDB(t)
	broker := testenv.Kafka(t)
	evs := events(traced+1, 3)
	parents := map[string]trace.SpanContext{}
	var recs []*kgo.Record
	for i, ev := range evs {
		rec := record(ev)
		if i < traced {
			sc, headers := writerSpan(t, i)
			parents[ev.ID] = sc
			rec.Headers = append(rec.Headers, headers...)
		}
		recs = append(recs, rec)
	}
	produce(t, broker.ListenAddrs(), recs...)

	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	var mu sync.Mutex
	inHandler := map[string]trace.SpanContext{}
	endedInHandler := 0
	handle := func(ctx context.Context, tx pgx.Tx, rec *kgo.Record) error {
		id := testenv.Header(rec, "id")
		mu.Lock()
		inHandler[id] = trace.SpanContextFromContext(ctx)
		for _, s := range spans.Ended() {
			if attr(s, "messaging.message.id") == id {
				endedInHandler++
			}
		}
		mu.Unlock()
		return countEvent(ctx, tx, rec)
	}
	cl := groupClient(t, broker.ListenAddrs(), "trace")
	obs := newObserved()
	endedAfterCommit := map[string]bool{}
	cfg := consumer.Config{DB: pool, Client: cl, Handle: handle, TracerProvider: tp}
	consumer.SetAfterDBCommit(&cfg, func(rec *kgo.Record, ran bool) error {
		obs.hook(rec, ran)
		id := testenv.Header(rec, "id")
		for _, s := range spans.Ended() {
			if attr(s, "messaging.message.id") == id {
				mu.Lock()
				endedAfterCommit[id] = true
				mu.Unlock()
			}
		}
		return nil
	})
	r := start(t, cfg)
	r.until(t, 30*time.Second, "every record", func() bool { ran, _ := obs.counts(); return ran == len(evs) })
	r.stop(t)
	cl.Close()
	checkCounters(t, pool, evs)

	ended := spans.Ended()
	if len(ended) != len(evs) {
		t.Fatalf("%d consumer spans ended, want %d", len(ended), len(evs))
	}
	mu.Lock()
	defer mu.Unlock()
	if endedInHandler != 0 {
		t.Errorf("%d records' spans had ended while their handlers ran; a span ends after its transaction", endedInHandler)
	}
	for _, s := range ended {
		id := attr(s, "messaging.message.id")
		if s.SpanKind() != trace.SpanKindConsumer || s.Name() != "process "+topic ||
			attr(s, "messaging.system") != "kafka" || attr(s, "messaging.destination.name") != topic {
			t.Errorf("span %q kind %s, attributes %v: want a consumer span \"process %s\" with messaging attributes",
				s.Name(), s.SpanKind(), s.Attributes(), topic)
		}
		if !endedAfterCommit[id] {
			t.Errorf("event %s: its span had not ended when its transaction committed", id)
		}
		if got := inHandler[id]; !got.Equal(s.SpanContext()) {
			t.Errorf("event %s: the handler's span context %v is not the consumer span's %v", id, got, s.SpanContext())
		}
		want, traced := parents[id]
		switch {
		case traced && !s.Parent().Equal(want):
			t.Errorf("event %s: consumer span's parent %v, want the writer's %v", id, s.Parent(), want)
		case traced && s.SpanContext().TraceState().Get("vendor") != "w1":
			t.Errorf("event %s: tracestate %q not carried on", id, s.SpanContext().TraceState())
		case !traced && (s.Parent().IsValid() || !s.SpanContext().IsValid()):
			t.Errorf("event %s without trace headers: parent %v, span %v; want the root of a new trace", id, s.Parent(), s.SpanContext())
		}
		delete(parents, id)
	}
	if len(parents) != 0 {
		t.Errorf("no consumer span for %d traced events", len(parents))
	}
}

// ContextFromHeaders gives Once users the writer's trace: a span started from it
// is the writer's child.
func TestContextFromHeaders(t *testing.T) {
	t.Parallel()
	parent, headers := writerSpan(t, 1)
	rec := record(event{ID: newUUID(), AggregateID: "a"})
	rec.Headers = append(rec.Headers, headers...)

	ctx := consumer.ContextFromHeaders(context.Background(), rec)
	if got := trace.SpanContextFromContext(ctx); !got.Equal(parent) {
		t.Fatalf("ContextFromHeaders: span context %v, want %v", got, parent)
	}
	spans := tracetest.NewSpanRecorder()
	_, span := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)).Tracer("app").Start(ctx, "handle")
	span.End()
	if got := spans.Ended()[0].Parent(); !got.Equal(parent) {
		t.Errorf("span started from ContextFromHeaders has parent %v, want %v", got, parent)
	}

	bare := record(event{ID: newUUID(), AggregateID: "a"})
	if sc := trace.SpanContextFromContext(consumer.ContextFromHeaders(context.Background(), bare)); sc.IsValid() {
		t.Errorf("a record without trace headers gave span context %v", sc)
	}
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if kv.Key == attribute.Key(key) {
			return kv.Value.Emit()
		}
	}
	return ""
}

// A span started before outbox.Write is the parent of the consumer's span, through a
// real relay that turns the trace column into headers.
func TestTraceFromWriterToConsumer(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	pool := newPool(t, dbURL)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE counters (aggregate_id text PRIMARY KEY, n bigint NOT NULL);
		ALTER TABLE outbox_events ADD COLUMN traceparent text`); err != nil {
		t.Fatal(err)
	}
	broker := testenv.Kafka(t)
	writerSpans := map[string]trace.SpanContext{}
	app := sdktrace.NewTracerProvider().Tracer("app")
	w := outbox.Writer{TraceColumn: outbox.DefaultTraceColumn}
	var evs []event
	for i := range 8 {
		sctx, span := app.Start(ctx, "place order")
		err := pgx.BeginFunc(sctx, pool, func(tx pgx.Tx) error {
			ev := outbox.Event{AggregateType: "order", AggregateID: fmt.Sprintf("o-%d", i%3), EventType: "order.created",
				Payload: []byte(`{"total": 1}`)}
			if err := w.Write(sctx, tx, &ev); err != nil {
				return err
			}
			evs = append(evs, event{ID: ev.ID, AggregateID: ev.AggregateID})
			writerSpans[ev.ID] = span.SpanContext()
			return nil
		})
		span.End()
		if err != nil {
			t.Fatal(err)
		}
	}
	runRelay(t, dbURL, broker.ListenAddrs())

	spans := tracetest.NewSpanRecorder()
	cl := groupClient(t, broker.ListenAddrs(), "traced", kgo.BlockRebalanceOnPoll(),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(time.Second))
	defer cl.CloseAllowingRebalance()
	obs := newObserved()
	var mu sync.Mutex
	withHeader := 0
	cfg := consumer.Config{DB: pool, Client: cl, Handle: countEvent,
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))}
	consumer.SetAfterDBCommit(&cfg, func(rec *kgo.Record, ran bool) error {
		obs.hook(rec, ran)
		if testenv.Header(rec, "traceparent") != "" {
			mu.Lock()
			withHeader++
			mu.Unlock()
		}
		return nil
	})
	r := start(t, cfg)
	r.until(t, 45*time.Second, "every event", func() bool { ran, _ := obs.counts(); return ran == len(evs) })
	r.stop(t)
	checkCounters(t, pool, evs)
	if withHeader != len(evs) {
		t.Errorf("%d of %d records carried a traceparent header", withHeader, len(evs))
	}
	ended := spans.Ended()
	if len(ended) != len(evs) {
		t.Fatalf("%d consumer spans, want %d", len(ended), len(evs))
	}
	for _, s := range ended {
		id := attr(s, "messaging.message.id")
		if want := writerSpans[id].WithRemote(true); !s.Parent().Equal(want) {
			t.Errorf("event %s: consumer span's parent %v, want the writer's span %v", id, s.Parent(), want)
		}
	}
}

// runRelay streams dbURL to the brokers until the test ends.
func runRelay(t *testing.T, dbURL string, brokers []string) {
	t.Helper()
	snk, err := kafka.New(kafka.Config{Brokers: brokers})
	if err != nil {
		t.Fatal(err)
	}
	rcfg := relay.DefaultConfig()
	rcfg.DatabaseURL, rcfg.Sink = dbURL, snk
	rcfg.Slot = "consumer_" + strings.ReplaceAll(newUUID()[:13], "-", "_")
	rcfg.Logger = slog.New(slog.DiscardHandler)
	rl, err := relay.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rl.Run(rctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("relay.Run: %v", err)
		}
		snk.Close()
	})
}
