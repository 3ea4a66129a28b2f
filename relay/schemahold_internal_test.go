package relay

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// fakeRegistry answers as told: down, refusing, or with id 7.
type fakeRegistry struct {
	down, refuse atomic.Bool
	calls        atomic.Int64
	// answer, when set, holds each call until it is closed: a registry slow to
	// answer, so that a test can queue events behind one being resolved.
	answer chan struct{}
}

func (f *fakeRegistry) Resolve(_ context.Context, need record.SchemaNeed) (int32, error) {
	f.calls.Add(1)
	if f.answer != nil {
		<-f.answer
	}
	switch {
	case f.down.Load():
		return 0, errors.New("connection refused")
	case f.refuse.Load():
		return 0, &record.RefusedError{Subject: need.Subject, Status: 409, Message: "incompatible"}
	}
	return 7, nil
}

func newTestHold(t *testing.T, delivery Delivery) (*schemaHold, *fakeRegistry) {
	t.Helper()
	reg := &fakeRegistry{}
	f := &record.Format{ValueConverter: record.Avro,
		Schemas: &record.Schemas{Topic: func(*outbox.Event) string { return "t" }}}
	r, err := newSchemaResolver(Config{Format: f, SchemaRegistry: reg, Delivery: delivery},
		slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil || r == nil {
		t.Fatalf("resolver: %v", err)
	}
	return &schemaHold{r: r}, reg
}

// waitResumed waits until the hold's resolution finished.
func waitResumed(t *testing.T, h *schemaHold) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for h.gate.Paused() {
		if !h.gate.Wait(ctx, time.Now().Add(time.Second)) && ctx.Err() != nil {
			t.Fatal("the resolution did not finish")
		}
	}
}

// An id not cached holds the message until it is resolved; then the event passes,
// and the same shape again asks nothing of the registry. A refusal is a final
// event error (a dead letter at its first attempt), counted by subject.
func TestSchemaHoldResolvesAndRefuses(t *testing.T) {
	h, reg := newTestHold(t, AtLeastOnce)
	ev := &outbox.Event{ID: "1", AggregateID: "a", Payload: []byte("x")}
	var held *replication.Held
	if _, err := h.check(context.Background(), ev); !errors.As(err, &held) {
		t.Fatalf("first check: %v, want Held", err)
	}
	waitResumed(t, h)
	if v, err := h.check(context.Background(), ev); v != nil || err != nil {
		t.Fatalf("after resolution: %v %v", v, err)
	}
	calls := reg.calls.Load()
	for range 100 {
		if v, err := h.check(context.Background(), ev); v != nil || err != nil {
			t.Fatal(v, err)
		}
	}
	if reg.calls.Load() != calls {
		t.Errorf("%d registry calls for cached events", reg.calls.Load()-calls)
	}

	reg.refuse.Store(true)
	bytea := &outbox.Event{ID: "2", AggregateID: "a", Payload: []byte("x"), PayloadType: "bytea"}
	if _, err := h.check(context.Background(), bytea); !errors.As(err, &held) {
		t.Fatalf("new schema: %v, want Held", err)
	}
	waitResumed(t, h)
	v, err := h.check(context.Background(), bytea)
	if err != nil || !sink.IsFinal(v) {
		t.Fatalf("refused: verdict %v err %v, want a final event error", v, err)
	}
	if n := testCounter(t, h.r.refused.WithLabelValues("t-value")); n != 1 {
		t.Errorf("walrelay_schema_refused_events_total{subject=t-value} = %v, want 1", n)
	}
}

// While the registry does not answer, the hold goes on, the gauge is 0 and
// readiness has a reason; with exactly-once the hold ends the session once it
// reaches maxHold, before the Kafka transaction's timeout.
func TestSchemaHoldOutageAndExactlyOnceBound(t *testing.T) {
	h, reg := newTestHold(t, ExactlyOnce)
	if h.r.maxHold <= 0 || h.r.maxHold >= time.Minute {
		t.Fatalf("exactly-once maxHold %s, want within the one-minute transaction timeout", h.r.maxHold)
	}
	h.r.maxHold = 300 * time.Millisecond
	reg.down.Store(true)
	ev := &outbox.Event{ID: "1", AggregateID: "a", Payload: []byte("x")}
	var held *replication.Held
	if _, err := h.check(context.Background(), ev); !errors.As(err, &held) {
		t.Fatalf("check: %v, want Held", err)
	}
	waitResumed(t, h) // gives up at maxHold
	if h.r.down.Load() == nil || testCounter(t, h.r.up) != 0 {
		t.Error("registry down: no readiness reason, or walrelay_schema_registry_up not 0")
	}
	if _, err := h.check(context.Background(), ev); err == nil || errors.As(err, &held) {
		t.Fatalf("past maxHold: %v, want the session to end", err)
	}
	reg.down.Store(false)
	if _, err := h.check(context.Background(), ev); !errors.As(err, &held) {
		t.Fatalf("after the hold ended: %v, want Held", err)
	}
	waitResumed(t, h)
	if v, err := h.check(context.Background(), ev); v != nil || err != nil || h.r.down.Load() != nil || testCounter(t, h.r.up) != 1 {
		t.Fatalf("after recovery: %v %v", v, err)
	}
}

func testCounter(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	return testutil.ToFloat64(c)
}

// recordingSink records the order events reach it and acks them at once.
type recordingSink struct {
	sink.Sink
	mu  sync.Mutex
	ids []string
}

func (s *recordingSink) Publish(ev *outbox.Event, done sink.Done) {
	s.mu.Lock()
	s.ids = append(s.ids, ev.ID)
	s.mu.Unlock()
	done.Done(nil)
}

// resolvingSink never lets an event overtake one waiting for its ids; while the
// registry does not answer, the waiting event and those behind it fail as an
// unavailable broker does (no event error), and a refusal is a final event error.
func TestResolvingSinkKeepsOrder(t *testing.T) {
	h, reg := newTestHold(t, AtLeastOnce)
	rec := &recordingSink{}
	s := newResolvingSink(rec, h.r)
	results := make(chan error, 10)
	done := sink.DoneFunc(func(err error) { results <- err })
	text := func(id string) *outbox.Event { return &outbox.Event{ID: id, AggregateID: "a", Payload: []byte("x")} }
	s.Publish(text("1"), done) // new schema: queued
	s.Publish(text("2"), done) // cached by then or not: behind 1
	for range 2 {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	rec.mu.Lock()
	if len(rec.ids) != 2 || rec.ids[0] != "1" || rec.ids[1] != "2" {
		t.Fatalf("order %v, want [1 2]", rec.ids)
	}
	rec.mu.Unlock()

	reg.down.Store(true)
	reg.answer = make(chan struct{}) // set before the resolving goroutine starts
	bytea := &outbox.Event{ID: "3", AggregateID: "a", Payload: []byte("x"), PayloadType: "bytea"}
	s.Publish(bytea, done)
	s.Publish(text("4"), done) // cached, but behind 3, which waits for the registry
	close(reg.answer)
	for range 2 {
		if err := <-results; err == nil || sink.IsEventError(err) {
			t.Fatalf("registry down: %v, want a broker-like error", err)
		}
	}
	reg.down.Store(false)
	reg.refuse.Store(true)
	s.Publish(bytea, done)
	if err := <-results; !sink.IsFinal(err) {
		t.Fatalf("refused: %v, want a final event error", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.ids) != 2 {
		t.Errorf("published %v after the outage and the refusal, want nothing more", rec.ids)
	}
}
