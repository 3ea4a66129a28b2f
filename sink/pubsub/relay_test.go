package pubsub_test

import (
	"encoding/json"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/pstest"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink/pubsub"
)

// Pub/Sub unreachable for a few seconds while the application keeps committing,
// longer than the client's publish timeout, so that the sink's own retries carry
// the events across: once it is back every event is in the topic, with its
// attributes, in commit order per aggregate (first deliveries); repeats, which
// Pub/Sub cannot drop, are counted.
func TestRelayOutage(t *testing.T) {
	t.Parallel()
	var proxy *testenv.Proxy
	logs := &testenv.LogBuffer{}
	f, topic, snk := start(t, func(cfg *pubsub.Config) {
		proxy = testenv.NewProxy(t, cfg.EmulatorHost)
		cfg.EmulatorHost = proxy.Addr()
		cfg.Publish.Timeout = time.Second
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	writer := testenv.Connect(t, dbURL)
	testenv.RunRelay(t, dbURL, "pubsub_outage", snk, logs)

	aggs := make([]string, 37)
	for i := range aggs {
		aggs[i] = "out-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
	}
	const txs, perTx = 80, 25
	writtenCh := make(chan []outbox.Event, 1)
	progress := make(chan int, txs)
	go func() {
		var evs []outbox.Event
		for i := range txs {
			evs = append(evs, testenv.WriteTx(t, writer, aggs[i%len(aggs):], "order.updated", perTx, false)...)
			progress <- i
			time.Sleep(50 * time.Millisecond) // pacing the load, so it spans the outage
		}
		writtenCh <- evs
	}()
	if !testenv.Eventually(30*time.Second, func() bool { return f.count(topic) >= 5*perTx }) {
		t.Fatalf("no events delivered before the outage (%d)", f.count(topic))
	}
	proxy.Down()
	before := len(progress)
	time.Sleep(2500 * time.Millisecond) // the outage itself
	if len(progress) == before {
		t.Fatal("the writer committed nothing during the outage")
	}
	during := f.count(topic)
	proxy.Up()
	upAt := time.Now()

	written := <-writtenCh
	if !testenv.Eventually(time.Minute, func() bool { return f.count(topic) >= len(written) }) {
		t.Fatalf("topic holds %d of %d events a minute after the outage", f.count(topic), len(written))
	}
	t.Logf("every event stored %s after the outage", time.Since(upAt).Round(time.Millisecond))
	marker := testenv.WriteTx(t, conn, []string{"marker"}, "marker", 1, false)[0]
	testenv.WaitFor(t, 30*time.Second, "the marker", func() bool {
		msgs := f.messages(topic)
		return msgs[len(msgs)-1].Attributes["id"] == marker.ID
	})
	dups := checkDelivered(t, f.messages(topic), append(written, marker))
	t.Logf("outage: %d of %d events stored when it ended; %d repeats", during, len(written), dups)
	if during >= len(written) || !strings.Contains(logs.String(), "pubsub unavailable") {
		t.Errorf("the outage missed the load: %d of %d events were stored before it ended, and the sink logged no failure", during, len(written))
	}
}

// checkDelivered asserts that msgs hold every written event with its attributes,
// data and ordering key, and that the first deliveries of each aggregate are in
// commit order (written is in commit order); it returns the number of repeats.
func checkDelivered(t *testing.T, msgs []*pstest.Message, written []outbox.Event) (repeats int) {
	t.Helper()
	pos := map[string]int{}
	for i, ev := range written {
		pos[ev.ID] = i
	}
	seen := map[string]bool{}
	last := map[string]int{}
	for _, m := range msgs {
		id := m.Attributes["id"]
		i, ok := pos[id]
		if !ok {
			t.Errorf("message %s: unknown event id %q", m.ID, id)
			continue
		}
		if seen[id] {
			repeats++
			continue
		}
		seen[id] = true
		ev := written[i]
		if m.OrderingKey != ev.AggregateID || m.Attributes["aggregate_id"] != ev.AggregateID ||
			m.Attributes["event_type"] != ev.EventType || m.Attributes["aggregate_type"] != ev.AggregateType {
			t.Errorf("event %s: ordering key %q, attributes %v", id, m.OrderingKey, m.Attributes)
		}
		var got, want any
		if json.Unmarshal(m.Data, &got) != nil || json.Unmarshal(ev.Payload, &want) != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("event %s: data %s, want %s", id, m.Data, ev.Payload)
		}
		if prev, ok := last[ev.AggregateID]; ok && i < prev {
			t.Errorf("aggregate %s: event %s (commit position %d) first stored after position %d", ev.AggregateID, id, i, prev)
		}
		last[ev.AggregateID] = i
	}
	lost := 0
	for _, ev := range written {
		if !seen[ev.ID] {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d events lost", lost, len(written))
	}
	return repeats
}
