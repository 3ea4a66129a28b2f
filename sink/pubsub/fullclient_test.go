package pubsub_test

import (
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink/pubsub"
)

// Publish must not wait while the client is full: with the service unreachable and
// the client's flow control far below what is published, every Publish returns at
// once (the relay calls it on the goroutine that reads the WAL); the events are
// stored, in order per key, once the service is back.
func TestPublishWhileTheClientIsFull(t *testing.T) {
	t.Parallel()
	var proxy *testenv.Proxy
	f, topic, s := start(t, func(cfg *pubsub.Config) {
		proxy = testenv.NewProxy(t, cfg.EmulatorHost)
		cfg.EmulatorHost = proxy.Addr()
		cfg.Publish.FlowControlSettings.MaxOutstandingMessages = 10
		cfg.Publish.FlowControlSettings.MaxOutstandingBytes = 64 << 10
	})
	proxy.Down()
	o := newOutcomes()
	evs := make([]*outbox.Event, 200)
	for i := range evs {
		evs[i] = event("order", []string{"a", "b", "c"}[i%3])
		evs[i].Payload = big(10 << 10)
	}
	testenv.ReturnsWithin(t, 10*time.Second, "Publish, with the service unreachable and the client full,", func() {
		for _, e := range evs {
			o.publish(s, e)
		}
	})
	proxy.Up()
	o.wait(t, len(evs))
	for _, e := range evs {
		if errs := o.of(e.ID); len(errs) != 1 || errs[0] != nil {
			t.Fatalf("event %s: %v", e.ID, errs)
		}
	}
	if n := f.count(topic); n < len(evs) {
		t.Fatalf("topic holds %d messages, want %d", n, len(evs))
	}
}
