package rabbitmq_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/rabbitmq"
)

// Publish must not wait while the client is full: with the broker unreachable and
// far more events than MaxPending, every Publish returns at once (the relay calls it
// on the goroutine that reads the WAL). The events within MaxPending wait and are
// confirmed once the broker is back; the rest fail at once with a broker-level
// error, which the relay outlasts by streaming them again.
func TestPublishWhileTheClientIsFull(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	name := uniqueName(t)
	b.exchange(t, name, false)
	queue := b.queue(t, name, name, "#")
	proxy := testenv.NewProxy(t, b.addr)
	cfg := rabbitmq.DefaultConfig()
	cfg.URL = b.viaProxy(proxy)
	cfg.ExchangeTemplate = name
	cfg.ReconnectMin, cfg.ReconnectMax = 50*time.Millisecond, 300*time.Millisecond
	cfg.MaxPending = 8
	s := newSink(t, cfg)
	o := newOutcomes()
	proxy.Down()
	const n = 500
	testenv.ReturnsWithin(t, 10*time.Second, "Publish, with the broker unreachable and the client full,", func() {
		for i := range n {
			o.publish(s, event(fmt.Sprintf("%s-%04d", name, i), "order", "a-1", "order.created"))
		}
	})
	proxy.Up()
	flush(t, s, 30*time.Second)
	acked := 0
	for i := range n {
		errs := o.of(fmt.Sprintf("%s-%04d", name, i))
		switch {
		case len(errs) != 1:
			t.Fatalf("event %d: %d outcomes, want 1", i, len(errs))
		case errs[0] == nil:
			acked++
		case sink.IsEventError(errs[0]):
			t.Fatalf("event %d: %v, want a broker-level error", i, errs[0])
		}
	}
	if acked < 1 {
		t.Fatal("no event was confirmed once the broker was back")
	}
	if !queue.waitFor(10*time.Second, func() bool { return queue.distinct() == acked }) {
		t.Fatalf("consumed %d distinct messages, want %d", queue.distinct(), acked)
	}
}
