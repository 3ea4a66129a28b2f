package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/rabbitmq"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tweak func(*rabbitmq.Config)
		want  string // in the error; "" for none
	}{
		{"defaults", func(*rabbitmq.Config) {}, ""},
		{"zero values take defaults", func(c *rabbitmq.Config) {
			*c = rabbitmq.Config{URL: c.URL}
		}, ""},
		{"no url", func(c *rabbitmq.Config) { c.URL = "" }, "rabbitmq url is required"},
		{"bad scheme", func(c *rabbitmq.Config) { c.URL = "http://localhost:5672/" }, "rabbitmq url"},
		{"url password stays out of the error", func(c *rabbitmq.Config) { c.URL = "amqp://u:s3cret@host:port/" }, "rabbitmq url"},
		{"bad exchange template", func(c *rabbitmq.Config) { c.ExchangeTemplate = "x.{aggregate}" }, "unknown placeholder"},
		{"bad routing key template", func(c *rabbitmq.Config) { c.RoutingKeyTemplate = "{event_type" }, "unclosed"},
		{"negative max pending", func(c *rabbitmq.Config) { c.MaxPending = -1 }, "max pending"},
		{"backoff max below min", func(c *rabbitmq.Config) { c.ReconnectMin, c.ReconnectMax = time.Second, time.Millisecond }, "reconnect max"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := rabbitmq.DefaultConfig()
			tc.tweak(&cfg)
			err := cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate: %v, want an error about %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "s3cret"):
				t.Fatalf("Validate leaks the password: %v", err)
			case tc.want != "":
				if _, err := rabbitmq.New(cfg); err == nil {
					t.Fatal("New accepted what Validate refused")
				}
			}
		})
	}
}

// New fails, saying where, when the broker cannot be reached.
func TestNewUnreachable(t *testing.T) {
	t.Parallel()
	cfg := rabbitmq.DefaultConfig()
	cfg.URL = "amqp://guest:guest@127.0.0.1:1/"
	_, err := rabbitmq.New(cfg)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("New: %v, want a connection error naming the address", err)
	}
}

// Failures of one event end in a *sink.EventError, and the sink goes on with the
// next events: an unroutable message (mandatory), a missing exchange, an exchange
// deleted while in use (404 closes the channel), a publish the broker refuses in the
// middle of a burst (403 on an internal exchange closes the channel with many
// messages unconfirmed), and a name AMQP cannot carry.
func TestEventErrors(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	prefix := uniqueName(t)
	okExchange, goneExchange, internalExchange := prefix+"-ok", prefix+"-gone", prefix+"-internal"
	b.exchange(t, okExchange, false)
	b.exchange(t, goneExchange, false)
	b.exchange(t, internalExchange, true)
	queue := b.queue(t, prefix, okExchange, "bound.#")
	b.do(t, "bind to "+goneExchange, func(ch *amqp.Channel) error { return ch.QueueBind(prefix, "bound.#", goneExchange, false, nil) })

	cfg := rabbitmq.DefaultConfig()
	cfg.URL = b.url
	cfg.ExchangeTemplate = prefix + "-{event_type}"
	cfg.RoutingKeyTemplate = "{aggregate_type}.{event_type}"
	s := newSink(t, cfg)
	o := newOutcomes()
	seq := 0
	publish := func(aggregateType, eventType string) *outbox.Event {
		seq++
		e := event(fmt.Sprintf("%s-%d", prefix, seq), aggregateType, "a-1", eventType)
		o.publish(s, e)
		return e
	}
	wantOK := func(e *outbox.Event) {
		t.Helper()
		if errs := o.of(e.ID); len(errs) != 1 || errs[0] != nil {
			t.Errorf("event %s (%s): done called with %v, want once with nil", e.ID, e.EventType, errs)
		}
	}
	wantEventError := func(e *outbox.Event, code int) {
		t.Helper()
		errs := o.of(e.ID)
		var ee *sink.EventError
		switch {
		case len(errs) != 1:
			t.Errorf("event %s (%s): done called %d times (%v), want once", e.ID, e.EventType, len(errs), errs)
		case !errors.As(errs[0], &ee):
			t.Errorf("event %s (%s): done(%v), want a *sink.EventError", e.ID, e.EventType, errs[0])
		case code != 0 && amqpCode(errs[0]) != code:
			t.Errorf("event %s (%s): %v, want AMQP code %d", e.ID, e.EventType, errs[0], code)
		default:
			t.Logf("event %s (%s): %v", e.ID, e.EventType, errs[0])
		}
	}

	// Unroutable: the exchange has no binding for unbound.ok.
	unroutable := publish("unbound", "ok")
	routed := publish("bound", "ok")
	flush(t, s, 10*time.Second)
	wantEventError(unroutable, amqp.NoRoute)
	wantOK(routed)

	// Missing exchange (DeclareExchange is false): caught by the exchange check.
	missing := publish("bound", "missing")
	afterMissing := publish("bound", "ok")
	flush(t, s, 10*time.Second)
	wantEventError(missing, amqp.NotFound)
	wantOK(afterMissing)

	// An exchange deleted after the sink saw it: the publish closes the channel with
	// 404, the sink opens another one.
	gone := publish("bound", "gone")
	flush(t, s, 10*time.Second)
	wantOK(gone)
	b.deleteExchange(t, goneExchange)
	afterDelete := publish("bound", "gone")
	afterGone := publish("bound", "ok")
	flush(t, s, 10*time.Second)
	wantEventError(afterDelete, amqp.NotFound)
	wantOK(afterGone)

	// A refused publish in the middle of a burst: every other event is acknowledged.
	var burst []*outbox.Event
	for i := 0; i < 150; i++ {
		burst = append(burst, publish("bound", "ok"))
	}
	refused := publish("bound", "internal")
	for i := 0; i < 150; i++ {
		burst = append(burst, publish("bound", "ok"))
	}
	flush(t, s, 20*time.Second)
	wantEventError(refused, amqp.AccessRefused)
	for _, e := range burst {
		wantOK(e)
	}

	// Too long for AMQP.
	long := publish(strings.Repeat("x", 300), "ok")
	last := publish("bound", "ok")
	flush(t, s, 10*time.Second)
	wantEventError(long, 0)
	wantOK(last)

	// Everything acknowledged is in the queue; nothing else is.
	acked := o.acked()
	if !queue.waitFor(10*time.Second, func() bool { return queue.distinct() >= len(acked) }) {
		t.Fatalf("consumed %d distinct messages, want %d", queue.distinct(), len(acked))
	}
	for _, id := range acked {
		if queue.count(id) == 0 {
			t.Errorf("acknowledged event %s is not in the queue", id)
		}
	}
	for _, e := range []*outbox.Event{unroutable, missing, afterDelete, refused, long} {
		if n := queue.count(e.ID); n != 0 {
			t.Errorf("failed event %s (%s) is in the queue %d times", e.ID, e.EventType, n)
		}
	}
	dups := len(queue.deliveries()) - queue.distinct()
	t.Logf("%d events acknowledged, %d duplicates in the queue (republished after the channel exceptions)", len(acked), dups)
}

// Through a broker outage in the middle of a stream of publishes, every event is
// acknowledged, and only after the broker confirmed it: each acknowledged event is
// in the queue. Events without a confirm when the connection broke were published
// again, so some are there twice.
func TestOutageRepublishes(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	name := uniqueName(t)
	b.exchange(t, name, false)
	queue := b.queue(t, name, name, "#")
	proxy := testenv.NewProxy(t, b.addr)

	cfg := rabbitmq.DefaultConfig()
	cfg.URL = b.viaProxy(proxy)
	cfg.ExchangeTemplate = name
	cfg.ReconnectMin, cfg.ReconnectMax = 50*time.Millisecond, 500*time.Millisecond
	cfg.MaxPending = 4096 // more than the publisher sends during the outage
	s := newSink(t, cfg)
	o := newOutcomes()

	// A publisher at a steady pace, until stopped.
	stop, stopped := make(chan struct{}), make(chan int, 1)
	var stopOnce sync.Once
	halt := func() int {
		stopOnce.Do(func() { close(stop) })
		return <-stopped
	}
	go func() {
		tick := time.NewTicker(2 * time.Millisecond) // about 1,000 events a second
		defer tick.Stop()
		n := 0
		for {
			select {
			case <-stop:
				for {
					stopped <- n
				}
			case <-tick.C:
			}
			for range 2 {
				n++
				o.publish(s, event(fmt.Sprintf("%s-%d", name, n), "order", fmt.Sprintf("a-%d", n%7), "order.updated"))
			}
		}
	}()
	t.Cleanup(func() { halt() })

	if !waitUntil(10*time.Second, func() bool { return len(o.acked()) >= 300 }) {
		t.Fatalf("only %d events acknowledged before the outage", len(o.acked()))
	}
	proxy.Down()
	if !waitUntil(5*time.Second, func() bool { return s.Ping(context.Background()) != nil }) {
		t.Fatal("Ping still succeeds with the broker unreachable")
	}
	ackedAtDown := len(o.acked())
	outage := time.NewTimer(1500 * time.Millisecond) // the outage lasts this long
	<-outage.C
	proxy.Up()
	if !waitUntil(10*time.Second, func() bool { return len(o.acked()) >= ackedAtDown+1000 }) {
		t.Fatalf("%d events acknowledged after the outage, want 1000 more than %d", len(o.acked()), ackedAtDown)
	}
	published := halt()
	flush(t, s, 20*time.Second)

	if got := o.total(); got != published {
		t.Fatalf("done called %d times for %d events", got, published)
	}
	acked := o.acked()
	if len(acked) != published {
		for i := 1; i <= published; i++ {
			id := fmt.Sprintf("%s-%d", name, i)
			if errs := o.of(id); len(errs) != 1 || errs[0] != nil {
				t.Errorf("event %s: done(%v), want nil", id, errs)
			}
		}
	}
	if !queue.waitFor(20*time.Second, func() bool { return queue.distinct() >= len(acked) }) {
		t.Errorf("consumed %d distinct messages, %d acknowledged", queue.distinct(), len(acked))
	}
	for _, id := range acked {
		if queue.count(id) == 0 {
			t.Errorf("event %s acknowledged but not in the queue", id)
		}
	}
	assertFirstCopiesInOrder(t, queue.deliveries(), func(id string) int {
		var n int
		_, _ = fmt.Sscanf(id[len(name)+1:], "%d", &n)
		return n
	})
	dups := len(queue.deliveries()) - queue.distinct()
	t.Logf("%d events published around a 1.5s outage, %d acknowledged, %d duplicates in the queue (republished without a confirm)",
		published, len(acked), dups)
}

// assertFirstCopiesInOrder checks that, dropping duplicates by message id, each
// aggregate's messages are in publish order.
func assertFirstCopiesInOrder(t *testing.T, got []amqp.Delivery, seq func(id string) int) {
	t.Helper()
	seen := map[string]bool{}
	last := map[string]int{}
	for _, d := range got {
		if seen[d.MessageId] {
			continue
		}
		seen[d.MessageId] = true
		agg, _ := d.Headers["aggregate_id"].(string)
		n := seq(d.MessageId)
		if prev, ok := last[agg]; ok && n < prev {
			t.Errorf("aggregate %s: %s (position %d) first arrived after position %d", agg, d.MessageId, n, prev)
		}
		last[agg] = n
	}
}

// While the broker is unreachable, events queue up to MaxPending; later ones fail at
// once with a broker-level error. The queued ones are confirmed when it is back.
func TestFailFastWhileDisconnected(t *testing.T) {
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
	if !waitUntil(5*time.Second, func() bool { return s.Ping(context.Background()) != nil }) {
		t.Fatal("Ping still succeeds with the broker unreachable")
	}
	var events []*outbox.Event
	for i := range 12 {
		e := event(fmt.Sprintf("%s-%d", name, i), "order", "a-1", "order.created")
		events = append(events, e)
		o.publish(s, e)
	}
	if !waitUntil(5*time.Second, func() bool { return o.total() == 4 }) {
		t.Fatalf("%d events failed at once, want the 4 beyond MaxPending", o.total())
	}
	for _, e := range events[8:] {
		errs := o.of(e.ID)
		if len(errs) != 1 || errs[0] == nil || sink.IsEventError(errs[0]) {
			t.Fatalf("event %s: done(%v), want one broker-level error", e.ID, errs)
		}
		if !strings.Contains(errs[0].Error(), "unreachable") {
			t.Errorf("event %s: %v, want it to say the broker is unreachable", e.ID, errs[0])
		}
	}
	t.Logf("beyond MaxPending: %v", o.of(events[11].ID)[0])

	proxy.Up()
	flush(t, s, 20*time.Second)
	for _, e := range events[:8] {
		if errs := o.of(e.ID); len(errs) != 1 || errs[0] != nil {
			t.Errorf("event %s: done(%v), want nil after the broker came back", e.ID, errs)
		}
	}
	if !queue.waitFor(10*time.Second, func() bool { return queue.distinct() == 8 }) {
		t.Fatalf("consumed %d distinct messages, want 8", queue.distinct())
	}
	if err := s.Ping(context.Background()); err != nil {
		t.Errorf("Ping after reconnecting: %v", err)
	}
}

// Close fails events still without a confirm, with a broker-level error, once each;
// Publish after Close fails the same way.
func TestCloseFailsPending(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	name := uniqueName(t)
	b.exchange(t, name, false)
	proxy := testenv.NewProxy(t, b.addr)

	cfg := rabbitmq.DefaultConfig()
	cfg.URL = b.viaProxy(proxy)
	cfg.ExchangeTemplate = name
	s := newSink(t, cfg)
	o := newOutcomes()
	proxy.Down()
	var events []*outbox.Event
	for i := range 5 {
		e := event(fmt.Sprintf("%s-%d", name, i), "order", "a-1", "order.created")
		events = append(events, e)
		o.publish(s, e)
	}
	started := time.Now()
	s.Close()
	after := event(name+"-after", "order", "a-1", "order.created")
	events = append(events, after)
	o.publish(s, after)
	flush(t, s, 5*time.Second)
	t.Logf("Close took %s", time.Since(started).Round(time.Millisecond))
	for _, e := range events {
		errs := o.of(e.ID)
		if len(errs) != 1 || errs[0] == nil || sink.IsEventError(errs[0]) {
			t.Errorf("event %s: done(%v), want one broker-level error", e.ID, errs)
		}
	}
	if err := s.Ping(context.Background()); err == nil {
		t.Error("Ping succeeded after Close")
	}
}
