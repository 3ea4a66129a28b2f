package rabbitmq_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/rabbitmq"
)

// startRelay runs a relay streaming dbURL into snk until the test ends. Register the
// sink's Close before calling it, so that the relay stops first.
func startRelay(t *testing.T, dbURL, slotPrefix string, snk sink.Sink, logs *logBuffer) {
	t.Helper()
	var b [3]byte
	_, _ = rand.Read(b[:])
	testenv.RunRelay(t, dbURL, slotPrefix+"_"+hex.EncodeToString(b[:]), snk, logs)
}

// relaySink creates a sink logging into logs, closed when the test ends.
func relaySink(t *testing.T, cfg rabbitmq.Config, logs *logBuffer) *rabbitmq.Sink {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	return newSink(t, cfg)
}

func aggregates(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

// A clean run through the relay delivers every committed event exactly once, with
// the documented message format and routing key, in commit order per aggregate.
func TestRelayEndToEnd(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	dbURL := testenv.MigratedDatabase(t)
	name := uniqueName(t)
	b.exchange(t, name, false) // the sink declares it too (DeclareExchange): same kind, no conflict
	queue := b.queue(t, name, name, "#")

	logs := &logBuffer{}
	cfg := rabbitmq.DefaultConfig()
	cfg.URL = b.url
	cfg.ExchangeTemplate = name
	cfg.DeclareExchange = true
	s := relaySink(t, cfg, logs)
	startRelay(t, dbURL, "rmq_e2e", s, logs)

	conn := testenv.Connect(t, dbURL)
	aggs := aggregates("agg", 53)
	var written []outbox.Event
	started := time.Now()
	for i := 0; i < 40; i++ {
		eventType := []string{"order.created", "order.updated", "order.paid"}[i%3]
		written = append(written, testenv.WriteTx(t, conn, aggs[i%len(aggs):], eventType, 50, false)...)
	}
	if !queue.waitFor(time.Minute, func() bool { return queue.distinct() >= len(written) }) {
		t.Fatalf("delivered %d distinct of %d events", queue.distinct(), len(written))
	}
	t.Logf("%d events in %d transactions delivered in %s", len(written), 40, time.Since(started).Round(time.Millisecond))

	// A marker committed after everything: once it is in, nothing else is coming.
	marker := testenv.WriteTx(t, conn, []string{"marker"}, "marker", 1, false)[0]
	if !queue.waitFor(time.Minute, func() bool { return queue.count(marker.ID) > 0 }) {
		t.Fatal("marker not delivered")
	}
	got := queue.deliveries()
	if len(got) != len(written)+1 {
		t.Errorf("consumed %d messages, want %d (each event once, plus the marker)", len(got), len(written)+1)
	}

	byID := map[string]outbox.Event{}
	seq := map[string]int{}
	for i, ev := range written {
		byID[ev.ID], seq[ev.ID] = ev, i
	}
	lastSeq := map[string]int{}
	for _, d := range got {
		if d.MessageId == marker.ID {
			continue
		}
		ev, ok := byID[d.MessageId]
		if !ok {
			t.Fatalf("unknown message id %q", d.MessageId)
		}
		checkMessage(t, d, ev, name)
		if prev, ok := lastSeq[ev.AggregateID]; ok && seq[ev.ID] < prev {
			t.Errorf("aggregate %s: event %s (commit position %d) after position %d", ev.AggregateID, ev.ID, seq[ev.ID], prev)
		}
		lastSeq[ev.AggregateID] = seq[ev.ID]
	}
	for _, ev := range written {
		if n := queue.count(ev.ID); n != 1 {
			t.Errorf("event %s delivered %d times, want 1", ev.ID, n)
		}
	}
}

// checkMessage compares a delivery with the event it carries.
func checkMessage(t *testing.T, d amqp.Delivery, ev outbox.Event, exchange string) {
	t.Helper()
	if d.Exchange != exchange {
		t.Errorf("event %s: exchange %q, want %q", ev.ID, d.Exchange, exchange)
	}
	if want := ev.AggregateType + "." + ev.EventType; d.RoutingKey != want {
		t.Errorf("event %s: routing key %q, want %q", ev.ID, d.RoutingKey, want)
	}
	if d.DeliveryMode != amqp.Persistent {
		t.Errorf("event %s: delivery mode %d, want persistent (2)", ev.ID, d.DeliveryMode)
	}
	if d.ContentType != "application/json" || d.Type != ev.EventType {
		t.Errorf("event %s: content type %q, type %q; want application/json, %q", ev.ID, d.ContentType, d.Type, ev.EventType)
	}
	if !d.Timestamp.Equal(ev.CreatedAt.Truncate(time.Second)) {
		t.Errorf("event %s: timestamp %s, want %s (created_at in whole seconds)", ev.ID, d.Timestamp, ev.CreatedAt)
	}
	for key, want := range map[string]string{"event_type": ev.EventType, "aggregate_type": ev.AggregateType, "aggregate_id": ev.AggregateID} {
		if got, _ := d.Headers[key].(string); got != want {
			t.Errorf("event %s: header %s = %q, want %q", ev.ID, key, got, want)
		}
	}
	created, _ := d.Headers["created_at"].(string)
	if at, err := time.Parse(time.RFC3339Nano, created); err != nil || !at.Equal(ev.CreatedAt) {
		t.Errorf("event %s: header created_at %q (%v), want %s", ev.ID, created, err, ev.CreatedAt)
	}
	var gotBody, wantBody any
	if err := json.Unmarshal(d.Body, &gotBody); err != nil {
		t.Fatalf("event %s: body is not JSON: %v", ev.ID, err)
	}
	_ = json.Unmarshal(ev.Payload, &wantBody)
	if !reflect.DeepEqual(gotBody, wantBody) {
		t.Errorf("event %s: body %s, want %s", ev.ID, d.Body, ev.Payload)
	}
}

// The broker goes away for a few seconds while a writer keeps committing: the sink
// reconnects by itself and nothing is lost. Duplicates are allowed (at least once)
// and counted; the first copy of each event is in commit order per aggregate.
func TestRelayBrokerOutage(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	dbURL := testenv.MigratedDatabase(t)
	name := uniqueName(t)
	b.exchange(t, name, false)
	queue := b.queue(t, name, name, "#")
	proxy := testenv.NewProxy(t, b.addr)

	logs := &logBuffer{}
	cfg := rabbitmq.DefaultConfig()
	cfg.URL = b.viaProxy(proxy)
	cfg.ExchangeTemplate = name
	cfg.ReconnectMin, cfg.ReconnectMax = 100*time.Millisecond, 500*time.Millisecond
	s := relaySink(t, cfg, logs)
	startRelay(t, dbURL, "rmq_outage", s, logs)

	// The writer commits a transaction of 10 events every 10ms until stopped.
	writer := testenv.Connect(t, dbURL)
	aggs := aggregates("out", 37)
	var (
		mu      sync.Mutex
		written []outbox.Event
	)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			evs := testenv.WriteTx(t, writer, aggs[i%len(aggs):], "order.updated", 10, false)
			mu.Lock()
			written = append(written, evs...)
			mu.Unlock()
		}
	}()
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }); <-stopped }
	t.Cleanup(halt)
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(written)
	}

	if !queue.waitFor(30*time.Second, func() bool { return queue.distinct() >= 300 }) {
		t.Fatalf("only %d events delivered before the outage", queue.distinct())
	}
	proxy.Down()
	downAt, writtenAtDown := time.Now(), count()
	if !waitUntil(5*time.Second, func() bool { return s.Ping(context.Background()) != nil }) {
		t.Fatal("Ping still succeeds with the broker unreachable")
	}
	outage := time.NewTimer(2500*time.Millisecond - time.Since(downAt)) // the outage lasts 2.5s
	<-outage.C
	proxy.Up()
	writtenAtUp := count()
	if !queue.waitFor(30*time.Second, func() bool { return queue.distinct() >= writtenAtUp+200 }) {
		t.Fatalf("after the outage: %d distinct delivered, want more than %d", queue.distinct(), writtenAtUp+200)
	}
	halt()
	if writtenAtUp-writtenAtDown < 500 {
		t.Errorf("only %d events committed during the outage; the test wants load while the broker is down", writtenAtUp-writtenAtDown)
	}

	if !queue.waitFor(30*time.Second, func() bool { return queue.distinct() >= len(written) }) {
		t.Errorf("delivered %d distinct of %d events", queue.distinct(), len(written))
	}
	seq := map[string]int{}
	for i, ev := range written {
		seq[ev.ID] = i
		if queue.count(ev.ID) == 0 {
			t.Errorf("event %s lost", ev.ID)
		}
	}
	got := queue.deliveries()
	assertFirstCopiesInOrder(t, got, func(id string) int { return seq[id] })
	t.Logf("%d events committed (%d during the 2.5s outage), %d messages consumed, %d duplicates",
		len(written), writtenAtUp-writtenAtDown, len(got), len(got)-queue.distinct())
}
