package pubsub_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/sink/pubsub"
)

// BenchmarkDrain drains a backlog of b.N rows (200-byte payloads, 100 per
// transaction) through the relay into the fake, and reports events/s beside the
// fake's own ceiling: a client publishing the same number of messages, with the same
// attributes, ordering keys and batching, to a fake of its own as fast as it can
// with as many unacknowledged as the relay's default window (10,000).
// The relay's rate is read as a ratio of the client's: both share this machine
// with the fake and, for the relay, PostgreSQL. Run by make bench with -benchtime
// 50000x.
func BenchmarkDrain(b *testing.B) {
	for _, aggs := range []int{100, 10000} {
		b.Run(fmt.Sprintf("client/aggregates=%d", aggs), func(b *testing.B) { benchClient(b, aggs) })
		b.Run(fmt.Sprintf("relay/aggregates=%d", aggs), func(b *testing.B) { benchRelay(b, aggs) })
	}
}

// window is the relay's default in-flight window (relay.Config.MaxInFlightEvents).
const window = 10000

func benchClient(b *testing.B, aggs int) {
	f := newFake(b)
	topic := f.topic(prefix() + "order")
	client, err := gpubsub.NewClient(context.Background(), project, clientOpts(f)...)
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	pub := client.Publisher(topic)
	pub.EnableMessageOrdering = true
	pub.PublishSettings = pubsub.DefaultPublishSettings()
	defer pub.Stop()
	data := []byte(`{"pad": "` + strings.Repeat("x", 180) + `"}`)
	results := make([]*gpubsub.PublishResult, b.N)
	b.ResetTimer()
	for i := range b.N {
		if i >= window {
			if _, err := results[i-window].Get(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		agg := fmt.Sprintf("agg-%d", i%aggs)
		results[i] = pub.Publish(context.Background(), &gpubsub.Message{Data: data, OrderingKey: agg, Attributes: map[string]string{
			"id": fmt.Sprintf("0b9d3f8e-0000-4000-8000-%012d", i), "event_type": "order.created", "aggregate_type": "order",
			"aggregate_id": agg, "created_at": time.Now().UTC().Format(time.RFC3339Nano)}})
	}
	for _, r := range results {
		if _, err := r.Get(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

func benchRelay(b *testing.B, aggs int) {
	f := newFake(b)
	p := prefix()
	topic := f.topic(p + "order")
	dbURL := testenv.MigratedDatabase(b)
	conn := testenv.Connect(b, dbURL)
	slot := fmt.Sprintf("bench_pubsub_%d", aggs)
	run := func() (stop func()) {
		return testenv.RunRelay(b, dbURL, slot, newSink(b, f.config(p)), &testenv.LogBuffer{})
	}
	stop := run() // creates the slot; the backlog is written while no relay runs
	testenv.WriteTx(b, conn, []string{"warm"}, "warm", 1, false)
	testenv.WaitFor(b, time.Minute, "the relay streaming", func() bool { return f.count(topic) == 1 })
	stop()
	for written := 0; written < b.N; written += 100 {
		if _, err := conn.Exec(context.Background(), `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
			SELECT 'order', 'agg-' || (g % $2), 'order.created', jsonb_build_object('pad', repeat('x', 180))
			FROM generate_series(1, $1) g`, min(100, b.N-written), aggs); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	run()
	testenv.WaitFor(b, 10*time.Minute, "the backlog drained", func() bool { return f.count(topic) >= b.N+1 })
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
