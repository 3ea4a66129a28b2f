package sqs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/internal/testenv/sqsserver"
	"github.com/walrelay/walrelay/outbox"
)

// Publish must not wait while the client is full: with SQS unreachable and one
// request in flight at most, every Publish of far more events returns at once (the
// relay calls it on the goroutine that reads the WAL); the events wait in the sink
// and are stored, in order per group, once SQS is back.
func TestPublishWhileTheClientIsFull(t *testing.T) {
	t.Parallel()
	srv := sqsserver.Start(t, sqsserver.Options{})
	srv.CreateQueue("orders.fifo", 0)
	proxy := testenv.NewProxy(t, srv.Addr)
	cfg := config(srv, "orders.fifo")
	cfg.Endpoint = "http://" + proxy.Addr()
	cfg.MaxInFlightRequests = 1
	s := newSink(t, cfg)
	if err := s.Ping(context.Background()); err != nil {
		t.Fatalf("ping through the proxy: %v", err)
	}
	proxy.Down()
	o := newOutcomes()
	evs := make([]*outbox.Event, 200)
	for i := range evs {
		evs[i] = event("order", fmt.Sprint("agg-", i%4), i)
	}
	testenv.ReturnsWithin(t, 10*time.Second, "Publish, with SQS unreachable and the client full,", func() {
		for _, e := range evs {
			o.publish(s, e)
		}
	})
	if n := o.count(); n != 0 {
		t.Fatalf("%d events got an outcome while SQS was unreachable", n)
	}
	proxy.Up()
	flush(t, s, time.Minute)
	for _, e := range evs {
		if errs := o.of(e.ID); len(errs) != 1 || errs[0] != nil {
			t.Fatalf("event %s: %v", e.ID, errs)
		}
	}
	checkGroupOrder(t, srv, "orders.fifo", evs)
}
