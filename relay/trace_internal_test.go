package relay

import (
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink/kafka"
)

// An event whose headers carry the writer's trace context gets a span that is the
// writer's child, keeps its tracestate, starts at the commit and marks the
// hand-over; one without starts a trace of its own.
func TestEventSpanContinuesTheWritersTrace(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	snk, err := kafka.New(kafka.Config{Brokers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer snk.Close()
	tr := newEventTracer(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)), snk)

	committed := time.Now().Add(-250 * time.Millisecond)
	traced := outbox.Event{ID: "7c1e0f6e-3b8a-4a51-9e53-1d2b6f3c8e11", AggregateType: "order", AggregateID: "o-1",
		EventType: "order.created", Headers: []outbox.Header{
			{Key: "tenant", Value: "t1"},
			{Key: "traceparent", Value: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
			{Key: "tracestate", Value: "vendor=w1"},
		}}
	finish(tr.start(&traced, committed, byStream), nil)
	bare := outbox.Event{ID: "8d2f1a7f-4c9b-4b62-8f64-2e3c7a4d9f22", AggregateType: "order", AggregateID: "o-2", EventType: "order.created"}
	refused := errors.New("message too large")
	finish(tr.start(&bare, time.Time{}, byPoller), refused)

	ended := spans.Ended()
	if len(ended) != 2 {
		t.Fatalf("%d spans ended, want 2", len(ended))
	}
	s := ended[0]
	if got := s.Parent(); got.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		got.SpanID().String() != "00f067aa0ba902b7" || !got.IsRemote() {
		t.Errorf("span parent %v, want the writer's remote span 4bf92f35.../00f067aa...", got)
	}
	if s.SpanContext().TraceID() != s.Parent().TraceID() || s.SpanContext().TraceState().Get("vendor") != "w1" {
		t.Errorf("span %v is not in the writer's trace with its tracestate", s.SpanContext())
	}
	if s.SpanKind() != trace.SpanKindProducer || s.Name() != "publish order" {
		t.Errorf("span %q of kind %s, want a producer span \"publish order\"", s.Name(), s.SpanKind())
	}
	if !s.StartTime().Equal(committed) {
		t.Errorf("span starts %s, want the commit time %s", s.StartTime(), committed)
	}
	if ev := s.Events(); len(ev) != 1 || ev[0].Name != "handed to sink" || ev[0].Time.Before(committed) || ev[0].Time.After(s.EndTime()) {
		t.Errorf("span events %v, want one \"handed to sink\" between the commit and the end", ev)
	}
	want := map[string]string{"messaging.system": "kafka", "messaging.message.id": traced.ID,
		"messaging.operation.type": "send", "walrelay.event_type": "order.created", "walrelay.aggregate_id": "o-1",
		"walrelay.publisher": "stream"}
	for _, kv := range s.Attributes() {
		if w, ok := want[string(kv.Key)]; ok {
			if kv.Value.Emit() != w {
				t.Errorf("attribute %s = %q, want %q", kv.Key, kv.Value.Emit(), w)
			}
			delete(want, string(kv.Key))
		}
	}
	if len(want) > 0 {
		t.Errorf("span lacks attributes %v", want)
	}

	b := ended[1]
	if b.Parent().IsValid() || !b.SpanContext().IsValid() || b.SpanContext().TraceID() == s.SpanContext().TraceID() {
		t.Errorf("an event without trace headers: parent %v, span %v; want the root of a new trace", b.Parent(), b.SpanContext())
	}
	if b.Status().Code != codes.Error || b.Status().Description != refused.Error() {
		t.Errorf("a refused event's span has status %v, want the error", b.Status())
	}
}

// Tracing off is a nil tracer: the publisher starts no span.
func TestNoTracerProviderNoTracer(t *testing.T) {
	if tr := newEventTracer(nil, nil); tr != nil {
		t.Errorf("newEventTracer(nil) = %v, want nil", tr)
	}
	if sys := sinkSystem(nil); sys != "" {
		t.Errorf("sinkSystem(nil) = %q", sys)
	}
}
