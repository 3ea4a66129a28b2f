package relay

import (
	"context"
	"reflect"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
)

// tracerName identifies the relay's spans (the instrumentation scope).
const tracerName = "github.com/walrelay/walrelay/relay"

// eventTracer starts one producer span per published event, from its transaction's
// commit to the broker's verdict, with an event marking the hand-over to the sink:
// the span's start to that event is the commit-to-publish wait, the rest the
// publish. A nil *eventTracer traces nothing and costs nothing.
type eventTracer struct {
	tracer trace.Tracer
	system attribute.KeyValue // messaging.system, when the sink is one of walrelay's
}

func newEventTracer(tp trace.TracerProvider, snk sink.Sink) *eventTracer {
	if tp == nil {
		return nil
	}
	t := &eventTracer{tracer: tp.Tracer(tracerName)}
	if sys := sinkSystem(snk); sys != "" {
		t.system = attribute.String("messaging.system", sys)
	}
	return t
}

// sinkSystem names the broker of one of walrelay's sinks by its package (kafka,
// nats, rabbitmq, redis); "" for a sink of the application's own.
func sinkSystem(snk sink.Sink) string {
	typ := reflect.TypeOf(snk)
	for typ != nil && typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ == nil {
		return ""
	}
	if rest, ok := strings.CutPrefix(typ.PkgPath(), "github.com/walrelay/walrelay/sink/"); ok && !strings.Contains(rest, "/") {
		return rest
	}
	return ""
}

// Publishers, the walrelay.publisher attribute of a span: who handed the event to
// the sink.
const (
	byStream = "stream" // the stream and its catch-up pass
	byPoller = "poller" // a retry, a handed-over event, a poll-mode publish
)

// start begins ev's span as a child of the trace context in its headers, if any.
// committed is its transaction's commit time; zero (the catch-up pass, the poller)
// starts the span now.
func (t *eventTracer) start(ev *outbox.Event, committed time.Time, publisher string) trace.Span {
	ctx := context.Background()
	if len(ev.Headers) > 0 {
		ctx = propagation.TraceContext{}.Extract(ctx, headerCarrier(ev.Headers))
	}
	now := time.Now()
	if committed.IsZero() || committed.After(now) {
		committed = now
	}
	attrs := []attribute.KeyValue{
		attribute.String("messaging.operation.type", "send"),
		attribute.String("messaging.operation.name", "publish"),
		attribute.String("messaging.message.id", ev.ID),
		attribute.String("walrelay.aggregate_type", ev.AggregateType),
		attribute.String("walrelay.aggregate_id", ev.AggregateID),
		attribute.String("walrelay.event_type", ev.EventType),
		attribute.String("walrelay.publisher", publisher),
	}
	if t.system.Valid() {
		attrs = append(attrs, t.system)
	}
	if ev.Table != "" {
		attrs = append(attrs, attribute.String("walrelay.table", ev.Table))
	}
	_, span := t.tracer.Start(ctx, "publish "+ev.AggregateType, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithTimestamp(committed), trace.WithAttributes(attrs...))
	span.AddEvent("handed to sink", trace.WithTimestamp(now))
	return span
}

// tracedSink gives each event the poller publishes a span of its own, from the
// hand-over to the broker's verdict: an event's retries are spans beside the
// stream's first attempt, children of the same writer's span.
type tracedSink struct {
	sink.Sink
	t *eventTracer
}

// pollerSink is snk as the poller uses it: timed by the ack clock, and traced when
// tracing is on.
func (r *Relay) pollerSink(snk sink.Sink) sink.Sink {
	t := newEventTracer(r.cfg.TracerProvider, snk)
	if r.schemas != nil {
		snk = newResolvingSink(snk, r.schemas)
	}
	clocked := clockedSink{Sink: snk, acks: r.acks}
	if t == nil {
		return clocked
	}
	return tracedSink{Sink: clocked, t: t}
}

func (s tracedSink) Publish(ev *outbox.Event, done sink.Done) {
	span := s.t.start(ev, time.Time{}, byPoller)
	s.Sink.Publish(ev, sink.DoneFunc(func(err error) {
		finish(span, err)
		done.Done(err)
	}))
}

// finish ends span with the broker's verdict.
func finish(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// headerCarrier lets a propagator read an event's headers.
type headerCarrier []outbox.Header

func (c headerCarrier) Get(key string) string {
	for _, h := range c {
		if h.Key == key {
			return h.Value
		}
	}
	return ""
}

// Set is not used: the relay only reads the writer's context.
func (headerCarrier) Set(string, string) {}

func (c headerCarrier) Keys() []string {
	keys := make([]string, len(c))
	for i, h := range c {
		keys[i] = h.Key
	}
	return keys
}
