package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/kafka"
)

// The transactional producer: a committed position is read back by the next
// producer of the stream, with its origin; events of a transaction that did not
// commit stay invisible to read_committed consumers; a new producer fences the old
// one, whose commit then fails; another stream's position is its own.
func TestStreamProducerCommitsPositionWithEvents(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	broker := testenv.Kafka(t)
	snk, err := kafka.New(kafka.Config{Brokers: broker.ListenAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer snk.Close()
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`, kgo.FetchIsolationLevel(kgo.ReadCommitted()))

	first, _, ok, err := snk.OpenStream(ctx, "sys/db/slot")
	if err != nil || ok {
		t.Fatalf("first open: ok %v, err %v; want no position yet", ok, err)
	}
	committed := outbox.Event{ID: "00000000-0000-0000-0000-000000000001", AggregateType: "order", AggregateID: "a", EventType: "e", Payload: []byte(`{}`)}
	if err := first.Produce(&committed); err != nil {
		t.Fatal(err)
	}
	pos := sink.Position{LSN: 0x1234, Events: 3, Origin: "system=1 database=\"db\" slot=\"slot\" slot_created=none timeline=1"}
	if err := first.Commit(ctx, pos); err != nil {
		t.Fatal(err)
	}
	open := outbox.Event{ID: "00000000-0000-0000-0000-000000000002", AggregateType: "order", AggregateID: "a", EventType: "e", Payload: []byte(`{}`)}
	if err := first.Produce(&open); err != nil {
		t.Fatal(err)
	}

	second, got, ok, err := snk.OpenStream(ctx, "sys/db/slot")
	if err != nil || !ok {
		t.Fatalf("second open: ok %v, err %v; want the committed position", ok, err)
	}
	defer second.Close()
	if got != pos {
		t.Fatalf("position read back %+v, want %+v", got, pos)
	}
	if err := first.Commit(ctx, sink.Position{LSN: 0x2000}); err == nil {
		t.Fatal("the fenced producer committed")
	}
	first.Close()
	if !consumer.WaitFor(30*time.Second, func() bool { return consumer.Count(committed.ID) == 1 }) {
		t.Fatal("the committed event is not visible")
	}
	marker := outbox.Event{ID: "00000000-0000-0000-0000-000000000003", AggregateType: "order", AggregateID: "a", EventType: "e", Payload: []byte(`{}`)}
	if err := second.Produce(&marker); err != nil {
		t.Fatal(err)
	}
	if err := second.Commit(ctx, sink.Position{LSN: 0x3000, Events: -1}); err != nil {
		t.Fatal(err)
	}
	if !consumer.WaitFor(30*time.Second, func() bool { return consumer.Count(marker.ID) == 1 }) {
		t.Fatal("the marker is not visible")
	}
	if n := consumer.Count(open.ID); n != 0 {
		t.Fatalf("an event of the aborted transaction is visible %d times", n)
	}

	other, _, ok, err := snk.OpenStream(ctx, "sys/otherdb/slot")
	if err != nil || ok {
		t.Fatalf("another stream: ok %v, err %v; want no position of its own", ok, err)
	}
	other.Close()
}
