package outbox

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// TraceColumnValue is what a Writer stores in its trace column for ctx: the W3C
// traceparent of ctx's span context, or, when the span context carries a
// tracestate, both in the properties form
//
//	traceparent=00-...-...-01
//	tracestate=vendor=value
//
// which the relay turns into the traceparent and tracestate headers. It is empty
// when ctx carries no valid span context (the column is then NULL). p injects the
// context; nil means the global propagator when the application set one that
// writes traceparent, else W3C Trace Context.
func TraceColumnValue(ctx context.Context, p propagation.TextMapPropagator) string {
	carrier := propagation.MapCarrier{}
	tracePropagator(p).Inject(ctx, carrier)
	return TraceColumnContent(carrier[TraceParentHeader], carrier[TraceStateHeader])
}

// tracePropagator is p, or the global propagator when it writes traceparent, or
// W3C Trace Context: the global one is a no-op until the application sets it, and
// a trace column holding nothing for that reason would be a silent loss.
func tracePropagator(p propagation.TextMapPropagator) propagation.TextMapPropagator {
	if p != nil {
		return p
	}
	global := otel.GetTextMapPropagator()
	for _, f := range global.Fields() {
		if f == TraceParentHeader {
			return global
		}
	}
	return propagation.TraceContext{}
}
