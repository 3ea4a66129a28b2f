package kafka

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
)

// BenchmarkRecordCycle measures what one event costs the Kafka sink outside
// franz-go: its record built, then recycled by a successful promise.
func BenchmarkRecordCycle(b *testing.B) {
	tmpl, err := sink.ParseTemplate(DefaultTopicTemplate)
	if err != nil {
		b.Fatal(err)
	}
	s := &Sink{topic: tmpl}
	ev := &outbox.Event{ID: "0b5c9b0e-4c55-4a7e-9d1c-2f3f5b1c8e11", AggregateType: "order", AggregateID: "order-42",
		EventType: "order.created", Payload: make([]byte, 200), CreatedAt: time.Now()}
	acked := 0
	done := sink.DoneFunc(func(err error) { acked++ })
	b.ReportAllocs()
	for b.Loop() {
		r := newRecord(s.topic, &s.topics, ev, done)
		if len(r.Headers) != 5 || r.Topic != "outbox.event.order" {
			b.Fatal("record not built")
		}
		s.promise(&r.Record, nil)
	}
	if acked != b.N {
		b.Fatalf("%d acks for %d records", acked, b.N)
	}
}

// Errors about one record are event errors; a broker that is down is not.
func TestClassify(t *testing.T) {
	s := &Sink{}
	for _, tc := range []struct {
		name      string
		err       error
		acksSince uint64 // acknowledgements of other records after this one was produced
		event     bool
	}{
		{"too large", kerr.MessageTooLarge, 0, true},
		{"invalid topic", kerr.InvalidTopicException, 0, true},
		{"not authorised", kerr.TopicAuthorizationFailed, 0, true},
		{"unknown topic after retries", kerr.UnknownTopicOrPartition, 0, true},
		{"not enough replicas", kerr.NotEnoughReplicas, 0, false},
		{"timeout while the broker is down", kgo.ErrRecordTimeout, 0, false},
		{"timeout while others are acked", kgo.ErrRecordTimeout, 3, true},
		{"network", errors.New("dial tcp: connection refused"), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.acks.Store(100 + tc.acksSince)
			err := s.classify(tc.err, 100)
			if got := sink.IsEventError(err); got != tc.event {
				t.Fatalf("IsEventError(%v) = %v, want %v", err, got, tc.event)
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("classification lost the cause: %v", err)
			}
		})
	}
}
