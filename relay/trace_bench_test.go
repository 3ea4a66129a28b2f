package relay

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// ackingSink acknowledges each event as it is handed over, so that the benchmark
// measures the relay's side of the publish path and nothing of a broker's.
type ackingSink struct{}

func (ackingSink) Publish(_ *outbox.Event, done sink.Done) { done.Done(nil) }
func (ackingSink) Flush(context.Context) error             { return nil }
func (ackingSink) Ping(context.Context) error              { return nil }
func (ackingSink) Close()                                  {}

// BenchmarkPublishTracing is the relay's publish path for one event (hand-over,
// ack, settlement, metrics) with tracing off (no TracerProvider) and on (an SDK
// provider batching to an exporter that drops the spans), on an event that
// carries a traceparent header. Off must allocate no more than the path without
// tracing code: the one inflight per event.
func BenchmarkPublishTracing(b *testing.B) {
	ev := outbox.Event{ID: "7c1e0f6e-3b8a-4a51-9e53-1d2b6f3c8e11", AggregateType: "order", AggregateID: "o-1",
		EventType: "order.created", Payload: []byte(`{"total": 42.5}`),
		Headers: []outbox.Header{{Key: "traceparent", Value: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}
	for _, tc := range []struct {
		name string
		tp   func(b *testing.B) *sdktrace.TracerProvider
	}{
		{"off", func(*testing.B) *sdktrace.TracerProvider { return nil }},
		{"on", func(b *testing.B) *sdktrace.TracerProvider {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
			b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			return tp
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r := &Relay{window: replication.NewWindow(1<<20, 1<<40), acks: newAckClock(time.Now())}
			m, err := newMetrics(prometheus.NewRegistry(), r)
			if err != nil {
				b.Fatal(err)
			}
			r.metrics = m
			r.cfg.OnPublish = poller.None // settle at the ack: no bookkeeping to wait for
			if tp := tc.tp(b); tp != nil {
				r.cfg.TracerProvider = tp
			}
			p := r.publisher(ackingSink{}, nil)
			wm := replication.NewWatermark(r.window, 0)
			wm.Begin()
			at := position{lsn: 1, committed: time.Now()}
			size := ev.Size()
			b.ReportAllocs()
			for b.Loop() {
				p.publish(&ev, at, wm.Track(size), size)
			}
		})
	}
}
