package consumer

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/walrelay/walrelay/internal/tracectx"
)

// tracerName identifies the consumer's spans (the instrumentation scope).
const tracerName = "github.com/walrelay/walrelay/consumer"

// ContextFromHeaders returns ctx carrying the trace context of rec's headers
// (traceparent and tracestate, which walrelay copies from the outbox row's trace
// column), for callers of Once and OnceSQL: spans started from it are children
// of the span that wrote the event. It uses the global propagator when the
// application set one that reads traceparent, else W3C Trace Context.
func ContextFromHeaders(ctx context.Context, rec *kgo.Record) context.Context {
	return tracectx.Propagator(nil).Extract(ctx, HeaderCarrier{rec})
}

// HeaderCarrier lets a propagator read and write a record's headers.
type HeaderCarrier struct{ Record *kgo.Record }

// Get returns the value of the first header named key.
func (c HeaderCarrier) Get(key string) string { return header(c.Record, key) }

// Set replaces the header named key, or adds it.
func (c HeaderCarrier) Set(key, value string) {
	for i, h := range c.Record.Headers {
		if h.Key == key {
			c.Record.Headers[i].Value = []byte(value)
			return
		}
	}
	c.Record.Headers = append(c.Record.Headers, kgo.RecordHeader{Key: key, Value: []byte(value)})
}

// Keys lists the header names.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, len(c.Record.Headers))
	for i, h := range c.Record.Headers {
		keys[i] = h.Key
	}
	return keys
}

// tracing starts Run's span for each record.
type tracing struct {
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
}

func newTracing(tp trace.TracerProvider, p propagation.TextMapPropagator) tracing {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tracing{tracer: tp.Tracer(tracerName), propagator: tracectx.Propagator(p)}
}

// start begins rec's consumer span, a child of the trace context in its headers.
// Attributes are only built for a span that records, so that the global no-op
// provider costs next to nothing.
func (t tracing) start(ctx context.Context, rec *kgo.Record, id string) (context.Context, trace.Span) {
	ctx = t.propagator.Extract(ctx, HeaderCarrier{rec})
	ctx, span := t.tracer.Start(ctx, "process", trace.WithSpanKind(trace.SpanKindConsumer))
	if span.IsRecording() {
		span.SetName("process " + rec.Topic)
		span.SetAttributes(
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.operation.name", "process"),
			attribute.String("messaging.destination.name", rec.Topic),
			attribute.String("messaging.destination.partition.id", strconv.Itoa(int(rec.Partition))),
			attribute.Int64("messaging.kafka.offset", rec.Offset),
			attribute.String("messaging.kafka.message.key", string(rec.Key)),
			attribute.String("messaging.message.id", id),
		)
	}
	return ctx, span
}

// end closes span with the record's outcome.
func end(span trace.Span, ran bool, err error) {
	if span.IsRecording() {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		} else if !ran {
			span.SetAttributes(attribute.Bool("walrelay.duplicate", true))
		}
	}
	span.End()
}
