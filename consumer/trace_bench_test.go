package consumer

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkRecordSpanNoop is the consumer span's cost per record with no tracer
// provider set (the global no-op), on a record that carries a traceparent.
func BenchmarkRecordSpanNoop(b *testing.B) {
	tr := newTracing(nil, nil)
	rec := &kgo.Record{Topic: "outbox.event.order", Headers: []kgo.RecordHeader{
		{Key: "id", Value: []byte("0b9f8c4e-8c1e-4f51-9a53-1d2b6f3c8e11")},
		{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")},
	}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, span := tr.start(ctx, rec, "0b9f8c4e-8c1e-4f51-9a53-1d2b6f3c8e11")
		end(span, true, nil)
	}
}
