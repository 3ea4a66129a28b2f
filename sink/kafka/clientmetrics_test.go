package kafka_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/kafka"
)

// The sink asks no broker for a KIP-714 client-metrics subscription, so it never
// pushes metrics (each push took 8 MiB of heap: docs/performance.md, "Memory"). kfake
// subscribes every client to every metric; a franz-go client with its defaults that
// produces to the same broker asks, which shows that the broker would have been asked.
func TestSinkSendsNoClientMetrics(t *testing.T) {
	broker := testenv.Kafka(t)
	var asked atomic.Int32
	broker.ControlKey(int16(kmsg.GetTelemetrySubscriptions), func(kmsg.Request) (kmsg.Response, error, bool) {
		broker.KeepControl()
		asked.Add(1)
		return nil, nil, false
	})
	s, err := kafka.New(kafka.Config{Brokers: broker.ListenAddrs(), TopicTemplate: "m.{aggregate_type}"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	acked := make(chan error, 1)
	s.Publish(&outbox.Event{ID: "id-1", AggregateType: "order", AggregateID: "agg-1", EventType: "order.created",
		Payload: []byte(`{}`), CreatedAt: time.Now()}, sink.DoneFunc(func(err error) { acked <- err }))
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-acked; err != nil {
		t.Fatalf("publish: %v", err)
	}

	plain, err := kgo.NewClient(kgo.SeedBrokers(broker.ListenAddrs()...), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.ProduceSync(ctx, &kgo.Record{Topic: "m.plain", Value: []byte("{}")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for asked.Load() == 0 {
		if ctx.Err() != nil {
			t.Fatal("a franz-go client with its defaults never asked for a client-metrics subscription")
		}
		time.Sleep(10 * time.Millisecond) // polling a counter, not waiting for an event to happen
	}
	if err := s.Ping(ctx); err != nil { // one more round trip of the sink's client
		t.Fatal(err)
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("%d client-metrics subscription requests, want only the plain client's", n)
	}
}
