package outbox

import (
	"context"

	"go.opentelemetry.io/otel/propagation"

	"github.com/walrelay/walrelay/internal/tracectx"
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
	tracectx.Propagator(p).Inject(ctx, carrier)
	return TraceColumnContent(carrier[TraceParentHeader], carrier[TraceStateHeader])
}
