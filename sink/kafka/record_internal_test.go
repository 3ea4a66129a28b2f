package kafka

import (
	"testing"
	"time"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
)

// BenchmarkNewRecord measures what building one Kafka record costs the relay per event.
func BenchmarkNewRecord(b *testing.B) {
	tmpl, err := sink.ParseTemplate(DefaultTopicTemplate)
	if err != nil {
		b.Fatal(err)
	}
	s := &Sink{topic: tmpl}
	ev := &outbox.Event{ID: "0b5c9b0e-4c55-4a7e-9d1c-2f3f5b1c8e11", AggregateType: "order", AggregateID: "order-42",
		EventType: "order.created", Payload: make([]byte, 200), CreatedAt: time.Now()}
	b.ReportAllocs()
	for b.Loop() {
		r := s.newRecord(ev, nil)
		if len(r.Headers) != 5 {
			b.Fatal("headers")
		}
	}
}
