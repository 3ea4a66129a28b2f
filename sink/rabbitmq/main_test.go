package rabbitmq_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
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

var _ sink.Sink = (*rabbitmq.Sink)(nil)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// broker is the RabbitMQ server the tests use (the test binary's own node from
// testenv.RabbitMQ, or the explicit WALRELAY_TEST_RABBITMQ_URL), with an admin
// connection for declaring and deleting what each test needs under its own names.
type broker struct {
	url   string
	addr  string // host:port
	admin *amqp.Connection
}

// newBroker connects to the test binary's RabbitMQ node, starting it on first use.
func newBroker(t *testing.T) *broker {
	t.Helper()
	u := testenv.RabbitMQ(t)
	uri, err := amqp.ParseURI(u) // fills in the scheme's port when the URL has none
	if err != nil {
		t.Fatalf("%s: %v", u, err)
	}
	addr := net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port))
	conn, err := amqp.DialConfig(u, amqp.Config{Dial: amqp.DefaultDial(3 * time.Second)})
	if err != nil {
		t.Fatalf("RabbitMQ integration tests need a server at %s (guest/guest): %v", addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &broker{url: u, addr: addr, admin: conn}
}

// viaProxy is the broker's URL with its address replaced by a proxy's.
func (b *broker) viaProxy(p *testenv.Proxy) string {
	u, _ := url.Parse(b.url)
	u.Host = p.Addr()
	return u.String()
}

// do runs f on a fresh admin channel.
func (b *broker) do(t *testing.T, what string, f func(ch *amqp.Channel) error) {
	t.Helper()
	ch, err := b.admin.Channel()
	if err != nil {
		t.Fatalf("%s: open channel: %v", what, err)
	}
	defer ch.Close()
	if err := f(ch); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// uniqueName is a name for this test's exchanges and queues, unique per run.
func uniqueName(t *testing.T) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
	return "walrelay-test." + name + "." + hex.EncodeToString(b[:])
}

// exchange declares a durable topic exchange deleted when the test ends.
func (b *broker) exchange(t *testing.T, name string, internal bool) {
	t.Helper()
	b.do(t, "declare exchange "+name, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclare(name, amqp.ExchangeTopic, true, false, internal, false, nil)
	})
	t.Cleanup(func() {
		if ch, err := b.admin.Channel(); err == nil {
			_ = ch.ExchangeDelete(name, false, false)
			_ = ch.Close()
		}
	})
}

// deleteExchange deletes an exchange now.
func (b *broker) deleteExchange(t *testing.T, name string) {
	t.Helper()
	b.do(t, "delete exchange "+name, func(ch *amqp.Channel) error { return ch.ExchangeDelete(name, false, false) })
}

// queue declares a durable queue bound to exchange with each key, deleted when the
// test ends, and consumes it.
func (b *broker) queue(t *testing.T, name, exchange string, keys ...string) *consumer {
	t.Helper()
	b.do(t, "declare queue "+name, func(ch *amqp.Channel) error {
		if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
			return err
		}
		for _, k := range keys {
			if err := ch.QueueBind(name, k, exchange, false, nil); err != nil {
				return err
			}
		}
		return nil
	})
	t.Cleanup(func() {
		if ch, err := b.admin.Channel(); err == nil {
			_, _ = ch.QueueDelete(name, false, false, false)
			_ = ch.Close()
		}
	})
	return b.consume(t, name)
}

// consumer collects every delivery of one queue.
type consumer struct {
	changed chan struct{} // capacity 1: a delivery arrived

	mu   sync.Mutex
	got  []amqp.Delivery
	seen map[string]int // by message id
}

func (b *broker) consume(t *testing.T, queue string) *consumer {
	t.Helper()
	conn, err := amqp.Dial(b.url)
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("consumer channel: %v", err)
	}
	deliveries, err := ch.Consume(queue, "", true, true, false, false, nil)
	if err != nil {
		t.Fatalf("consume %s: %v", queue, err)
	}
	c := &consumer{changed: make(chan struct{}, 1), seen: map[string]int{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for d := range deliveries {
			c.mu.Lock()
			c.got = append(c.got, d)
			c.seen[d.MessageId]++
			c.mu.Unlock()
			select {
			case c.changed <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = conn.Close()
		<-done
	})
	return c
}

// distinct is the number of distinct message ids consumed.
func (c *consumer) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// count is how often the message id was consumed.
func (c *consumer) count(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[id]
}

// deliveries returns what was consumed so far, in order.
func (c *consumer) deliveries() []amqp.Delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]amqp.Delivery(nil), c.got...)
}

// waitFor waits until cond holds, checking it on each delivery, or timeout passes.
func (c *consumer) waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-c.changed:
		case <-deadline.C:
			return cond()
		}
	}
	return true
}

var waitUntil = testenv.Eventually

// newSink creates a sink closed when the test ends.
func newSink(t *testing.T, cfg rabbitmq.Config) *rabbitmq.Sink {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	s, err := rabbitmq.New(cfg)
	if err != nil {
		t.Fatalf("rabbitmq.New: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// testLogger logs through t until the test ends.
func testLogger(t *testing.T) *slog.Logger {
	var mu sync.Mutex
	ended := false
	t.Cleanup(func() {
		mu.Lock()
		ended = true
		mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			t.Log(strings.TrimSpace(string(p)))
		}
		return len(p), nil
	}), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// logBuffer collects logs; printed when a test fails.
type logBuffer = testenv.LogBuffer

// outcomes records what done was called with, per event id.
type outcomes struct {
	mu   sync.Mutex
	errs map[string][]error
	n    int
}

func newOutcomes() *outcomes { return &outcomes{errs: map[string][]error{}} }

func (o *outcomes) publish(s *rabbitmq.Sink, e *outbox.Event) {
	s.Publish(e, sink.DoneFunc(func(err error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.errs[e.ID] = append(o.errs[e.ID], err)
		o.n++
	}))
}

// of returns the errors done was called with for the event id.
func (o *outcomes) of(id string) []error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]error(nil), o.errs[id]...)
}

// total is the number of done calls.
func (o *outcomes) total() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n
}

// acked returns the ids acknowledged with nil.
func (o *outcomes) acked() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ids []string
	for id, errs := range o.errs {
		if len(errs) > 0 && errs[0] == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// event builds an event without a database.
func event(id, aggregateType, aggregateID, eventType string) *outbox.Event {
	return &outbox.Event{ID: id, AggregateType: aggregateType, AggregateID: aggregateID, EventType: eventType,
		Payload: []byte(fmt.Sprintf(`{"id": %q}`, id)), CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
}

// flush waits for every outcome.
func flush(t *testing.T, s *rabbitmq.Sink, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// amqpCode returns the AMQP reply code an error carries, or 0.
func amqpCode(err error) int {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return 0
}
