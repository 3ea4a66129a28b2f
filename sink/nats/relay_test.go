package nats_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
	natssink "github.com/walrelay/walrelay/sink/nats"
)

// cutAfter calls cut once the sink was handed its at-th event.
type cutAfter struct {
	*natssink.Sink
	n   atomic.Int64
	at  int64
	cut func()
}

func (c *cutAfter) Publish(e *outbox.Event, done sink.Done) {
	c.Sink.Publish(e, done)
	if c.n.Add(1) == c.at {
		c.cut()
	}
}

// Through the relay: every committed event is stored once, with the documented
// subject, headers and data, in commit order per aggregate.
func TestRelayEndToEnd(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	snk := newSink(t, f.config())
	stop := startRelay(t, dbURL, snk)

	started := time.Now()
	aggs := aggregates("agg", 53)
	var written []outbox.Event
	sizes := []int{1, 80, 7, 150, 30, 1, 200, 12, 64, 5}
	for i := 0; len(written) < 2000; i++ {
		written = append(written, testenv.WriteTx(t, conn, aggs[i%len(aggs):], "order.updated", sizes[i%len(sizes)], false)...)
	}
	// Another aggregate type goes to its own subject.
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	customer := outbox.Event{AggregateType: "customer", AggregateID: "c-1", EventType: "customer.created", Payload: []byte(`{"name": "Ada"}`)}
	if err := outbox.Write(ctx, tx, &customer); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	written = append(written, customer)

	if !f.waitCount(t, len(written), time.Minute) {
		t.Fatalf("stream holds %d of %d events", f.count(t), len(written))
	}
	t.Logf("%d events committed and stored in %s", len(written), time.Since(started).Round(time.Millisecond))
	stop()
	flushCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := snk.Flush(flushCtx); err != nil {
		t.Fatal(err)
	}
	f.checkStream(t, written)
}

// The broker goes away mid-load and comes back: nothing committed is lost, and the
// stream holds no duplicates (the in-flight messages sent again are dropped by
// Nats-Msg-Id) and keeps commit order per aggregate.
func TestRelayBrokerOutage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	proxy := testenv.NewProxy(t, f.addr)
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	cfg := f.config()
	cfg.URL = "nats://" + proxy.Addr()
	snk := newSink(t, cfg)
	// The outage starts right after the relay handed the sink its 1,000th event,
	// so that it cuts messages on their way and PubAcks not yet received.
	down := make(chan struct{})
	cutting := &cutAfter{Sink: snk, at: 1000, cut: func() {
		proxy.Down()
		close(down)
	}}
	stop := startRelay(t, dbURL, cutting)

	const outage = 2500 * time.Millisecond
	var committed atomic.Int64
	var atDown, atUp int64
	up := make(chan struct{})
	go func() {
		defer close(up)
		select {
		case <-down:
		case <-time.After(time.Minute):
			t.Error("the relay did not publish 1000 events within a minute")
			return
		}
		atDown = committed.Load()
		time.Sleep(outage) // the outage's length, not a synchronisation
		atUp = committed.Load()
		proxy.Up()
	}()

	aggs := aggregates("out", 29)
	var written []outbox.Event
	after := 0
	for i := 0; after < 10; i++ {
		if len(written) >= 8000 {
			<-up // enough is waiting; keep the test short
		}
		written = append(written, testenv.WriteTx(t, conn, aggs[i%len(aggs):], "order.updated", 50, false)...)
		committed.Store(int64(len(written)))
		select {
		case <-up:
			after++
		default:
		}
	}
	<-up
	t.Logf("committed %d events: %d before the outage, %d during it, %d after", len(written), atDown, atUp-atDown, int64(len(written))-atUp)
	if atUp <= atDown {
		t.Fatalf("no events committed during the outage (%d before, %d at its end)", atDown, atUp)
	}

	upAt := time.Now()
	if !f.waitCount(t, len(written), time.Minute) {
		t.Fatalf("stream holds %d of %d events a minute after the outage", f.count(t), len(written))
	}
	t.Logf("all stored %s after the broker came back", time.Since(upAt).Round(time.Millisecond))
	stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := snk.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	f.checkStream(t, written)
}
