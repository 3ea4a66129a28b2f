package nats_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
)

// Publish must not wait while the client is full: with the server unreachable and
// far more events than MaxPending, every Publish returns at once (the relay calls it
// on the goroutine that reads the WAL); the events wait in the sink and are
// acknowledged, in order, once the server is back.
func TestPublishWhileTheClientIsFull(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	proxy := testenv.NewProxy(t, f.addr)
	cfg := f.config()
	cfg.URL = "nats://" + proxy.Addr()
	cfg.MaxPending = 16
	s := newSink(t, cfg)
	c := newCollector()
	proxy.Down()
	const n = 500
	testenv.ReturnsWithin(t, 10*time.Second, "Publish, with the server unreachable and the client full,", func() {
		for i := range n {
			ev := event(fmt.Sprintf("full-%04d", i), "order")
			s.Publish(ev, c.done(ev.ID))
		}
	})
	proxy.Up()
	if !c.wait(t, n, time.Minute) {
		t.Fatal("not every event got its outcome once the server was back")
	}
	for i := range n {
		if errs := c.get(fmt.Sprintf("full-%04d", i)); len(errs) != 1 || errs[0] != nil {
			t.Fatalf("event full-%04d: outcomes %v", i, errs)
		}
	}
	msgs := f.messages(t)
	if len(msgs) != n {
		t.Fatalf("stream holds %d messages, want %d", len(msgs), n)
	}
	for i, m := range msgs {
		if want := fmt.Sprintf("full-%04d", i); m.Header.Get("id") != want {
			t.Fatalf("stream seq %d holds %s, want %s", m.Sequence, m.Header.Get("id"), want)
		}
	}
}
