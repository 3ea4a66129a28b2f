package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// The example counts each order.created once per customer, though every event is
// delivered twice, and stops cleanly when its context is cancelled. All records
// share one key, so one partition: the marker produced last is counted last.
func TestCountsOrders(t *testing.T) {
	dbURL := testenv.MigratedDatabase(t)
	broker := testenv.Kafka(t)
	const topic = "outbox.event.order"

	var recs []*kgo.Record
	want := map[string]int{}
	for i := range 13 {
		customer := fmt.Sprintf("c-%d", i%3)
		if i == 12 {
			customer = "marker"
		}
		eventType := "order.created"
		if i%4 == 3 {
			eventType = "order.cancelled"
		} else {
			want[customer]++
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte("orders"),
			Value: fmt.Appendf(nil, `{"order_id": "o-%d", "customer_id": %q}`, i, customer),
			Headers: []kgo.RecordHeader{
				{Key: "id", Value: fmt.Appendf(nil, "00000000-0000-4000-8000-%012d", i)},
				{Key: "event_type", Value: []byte(eventType)},
			}})
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(broker.ListenAddrs()...), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	events, marker := recs[:12], recs[12]
	for range 2 { // every event delivered twice
		if err := producer.ProduceSync(ctx, events...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for _, r := range events {
			r.Offset, r.Partition = 0, 0 // fresh records for the second round
		}
	}
	if err := producer.ProduceSync(ctx, marker).FirstErr(); err != nil {
		t.Fatal(err)
	}
	producer.Close()

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, slog.New(slog.DiscardHandler), dbURL, broker.ListenAddrs(), "totals", topic)
	}()
	conn := testenv.Connect(t, dbURL)
	totals := func() map[string]int {
		got := map[string]int{}
		rows, err := conn.Query(ctx, "SELECT customer_id, orders FROM order_totals")
		if err != nil {
			return got // the table may not exist yet
		}
		for rows.Next() {
			var c string
			var n int
			if rows.Scan(&c, &n) == nil {
				got[c] = n
			}
		}
		return got
	}
	deadline := time.Now().Add(30 * time.Second)
	for totals()["marker"] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the marker was not counted; totals so far: %v", totals())
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not stop")
	}
	got := totals()
	delete(got, "marker")
	delete(want, "marker")
	var processed int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM processed_events").Scan(&processed); err != nil {
		t.Fatal(err)
	}
	if processed != len(recs) {
		t.Errorf("processed_events has %d rows, want %d", processed, len(recs))
	}
	for c, n := range want {
		if got[c] != n {
			t.Errorf("customer %s: %d orders, want %d", c, got[c], n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("order_totals %v, want %v", got, want)
	}
}
