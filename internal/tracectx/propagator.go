// Package tracectx chooses the propagator that carries the writer's trace context
// through an outbox event, for the outbox writer and the consumer alike.
package tracectx

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// Propagator is p, or the global propagator when it handles traceparent, or W3C
// Trace Context: the global one is a no-op until the application sets one, and a
// trace context dropped for that reason would go unnoticed.
func Propagator(p propagation.TextMapPropagator) propagation.TextMapPropagator {
	if p != nil {
		return p
	}
	global := otel.GetTextMapPropagator()
	for _, f := range global.Fields() {
		if f == "traceparent" {
			return global
		}
	}
	return propagation.TraceContext{}
}
