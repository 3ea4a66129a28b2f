package redis_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/redis"
)

var _ sink.Sink = (*redis.Sink)(nil)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tweak func(*redis.Config)
		want  string // in the error; "" for none
	}{
		{"defaults", func(*redis.Config) {}, ""},
		{"dedup disabled, no linger", func(c *redis.Config) { c.DedupWindow, c.Linger = 0, 0 }, ""},
		{"no url", func(c *redis.Config) { c.URL = "" }, "redis url is required"},
		{"bad scheme", func(c *redis.Config) { c.URL = "http://localhost:6379" }, "invalid URL scheme"},
		{"bad template", func(c *redis.Config) { c.StreamTemplate = "x.{aggregate}" }, "unknown placeholder"},
		{"negative max len", func(c *redis.Config) { c.MaxLen = -1 }, "max len"},
		{"sub-millisecond dedup", func(c *redis.Config) { c.DedupWindow = time.Microsecond }, "dedup window"},
		{"zero batch", func(c *redis.Config) { c.BatchSize = 0 }, "batch size"},
		{"negative linger", func(c *redis.Config) { c.Linger = -time.Millisecond }, "linger"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := redis.DefaultConfig()
			tc.tweak(&cfg)
			err := cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate: %v, want an error about %q", err, tc.want)
			case tc.want != "":
				if _, err := redis.New(cfg); err == nil {
					t.Fatal("New accepted what Validate refused")
				}
			}
		})
	}
}

// The same event published twice, in one batch and in separate ones, is one entry;
// every publish is acknowledged. With dedup disabled it is two.
func TestDedup(t *testing.T) {
	t.Parallel()
	r := newTestRedis(t)
	s := newSink(t, r.config())
	ctx := context.Background()
	o := newOutcomes()

	e := event("dedup", "a-1", 1)
	same := *e // a redelivery: another Event value with the same id
	o.publish(s, e)
	o.publish(s, &same)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	again := *e
	o.publish(s, &again)
	other := event("dedup", "a-1", 2)
	o.publish(s, other)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []*outbox.Event{e, &same, &again, other} {
		if errs := o.of(ev); len(errs) != 1 || errs[0] != nil {
			t.Errorf("event %s: done called with %v, want once with nil", ev.ID, errs)
		}
	}
	entries := r.read(r.prefix + "dedup")
	if len(entries) != 2 || entries[0].Fields["id"] != e.ID || entries[1].Fields["id"] != other.ID {
		t.Fatalf("stream holds %v, want %s then %s", entries, e.ID, other.ID)
	}
	ttl, err := r.client.PTTL(ctx, redis.DedupKeyPrefix+r.prefix+"dedup:"+e.ID).Result()
	if err != nil || ttl <= 23*time.Hour || ttl > 24*time.Hour {
		t.Errorf("dedup key ttl %s (%v), want just under 24h", ttl, err)
	}

	cfg := r.config()
	cfg.DedupWindow = 0
	cfg.StreamTemplate = r.prefix + "nodedup.{aggregate_type}"
	plain := newSink(t, cfg)
	o.publish(plain, e)
	if err := plain.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	o.publish(plain, e)
	if err := plain.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := r.xlen(r.prefix + "nodedup.dedup"); n != 2 {
		t.Fatalf("without dedup the stream holds %d entries, want 2", n)
	}
}

// MaxLen trims approximately: the stream stays near MaxLen, never below it.
func TestMaxLen(t *testing.T) {
	t.Parallel()
	r := newTestRedis(t)
	cfg := r.config()
	cfg.MaxLen = 100
	s := newSink(t, cfg)
	o := newOutcomes()
	for i := range 1000 {
		o.publish(s, event("trim", fmt.Sprint("agg-", i%7), i))
	}
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if o.count() != 1000 {
		t.Fatalf("%d outcomes for 1000 events", o.count())
	}
	n := r.xlen(r.prefix + "trim")
	if n < 100 || n >= 300 {
		t.Fatalf("stream holds %d entries, want about 100 (100 to 299)", n)
	}
	entries := r.read(r.prefix + "trim")
	if last := entries[len(entries)-1].Fields["payload"]; last != `{"n": 999}` {
		t.Fatalf("newest entry has payload %s, want the last event", last)
	}
}

// Every field of an entry is the event's.
func TestEntryFields(t *testing.T) {
	t.Parallel()
	r := newTestRedis(t)
	cfg := r.config()
	cfg.StreamTemplate = r.prefix + "{aggregate_type}.{event_type}"
	s := newSink(t, cfg)
	e := &outbox.Event{ID: "0b5e5a9e-3f0c-4c55-9a3e-7d1d8b0e2f11", AggregateType: "order", AggregateID: "o-42",
		EventType: "order.created", Payload: []byte(`{"total": 12.5, "items": ["a", "b"]}`),
		CreatedAt: time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("CEST", 2*3600))}
	o := newOutcomes()
	o.publish(s, e)
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	entries := r.read(r.prefix + "order.order.created")
	if len(entries) != 1 {
		t.Fatalf("%d entries, want 1", len(entries))
	}
	want := map[string]string{"id": e.ID, "event_type": "order.created", "aggregate_type": "order",
		"aggregate_id": "o-42", "created_at": "2024-05-06T05:08:09.123456789Z", "payload": string(e.Payload)}
	if got := entries[0].Fields; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("fields %v, want %v", got, want)
	}
}

// A stream key holding a string fails that event alone, as an *sink.EventError; the
// events around it in the same batch, and later ones, are written in order. The
// failed event's dedup key is removed, so it is written once the key is fixed.
func TestEventError(t *testing.T) {
	t.Parallel()
	r := newTestRedis(t)
	ctx := context.Background()
	if err := r.client.Set(ctx, r.prefix+"broken", "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	cfg := r.config()
	cfg.Linger = time.Second // the five events below go in one batch
	cfg.BatchSize = 5
	s := newSink(t, cfg)
	o := newOutcomes()
	evs := []*outbox.Event{event("good", "g", 0), event("good", "g", 1), event("broken", "b", 2), event("good", "g", 3), event("broken", "b", 4)}
	for _, e := range evs {
		o.publish(s, e)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i, e := range evs {
		errs := o.of(e)
		if len(errs) != 1 {
			t.Fatalf("event %d: done called %d times", i, len(errs))
		}
		var ee *sink.EventError
		switch {
		case e.AggregateType == "good" && errs[0] != nil:
			t.Errorf("event %d: %v, want success", i, errs[0])
		case e.AggregateType == "broken" && !errors.As(errs[0], &ee):
			t.Errorf("event %d: %v (%T), want a *sink.EventError", i, errs[0], errs[0])
		case e.AggregateType == "broken" && !strings.Contains(errs[0].Error(), "WRONGTYPE"):
			t.Errorf("event %d: %v, want it to name WRONGTYPE", i, errs[0])
		}
	}
	later := event("good", "g", 5)
	o.publish(s, later)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if errs := o.of(later); len(errs) != 1 || errs[0] != nil {
		t.Fatalf("later event: %v", errs)
	}
	var ids []string
	for _, en := range r.read(r.prefix + "good") {
		ids = append(ids, en.Fields["id"])
	}
	if want := []string{evs[0].ID, evs[1].ID, evs[3].ID, later.ID}; fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("good stream holds %v, want %v", ids, want)
	}

	// Fixed by an operator, the failed event goes through when retried.
	if err := r.client.Del(ctx, r.prefix+"broken").Err(); err != nil {
		t.Fatal(err)
	}
	retried := *evs[2]
	o.publish(s, &retried)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if errs := o.of(&retried); len(errs) != 1 || errs[0] != nil {
		t.Fatalf("retried event: %v", errs)
	}
	if entries := r.read(r.prefix + "broken"); len(entries) != 1 || entries[0].Fields["id"] != evs[2].ID {
		t.Fatalf("broken stream after the fix holds %v, want the retried event", entries)
	}
}

// While Redis is unreachable nothing is acknowledged or failed, Flush waits, and
// Ping fails; when it returns everything is written once, in order. Close fails what
// Redis never confirmed with ErrClosed, which is not an event error.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	r := newTestRedis(t)
	proxy := testenv.NewProxy(t, r.addr())
	cfg := r.config()
	cfg.URL = "redis://" + proxy.Addr() + "/0"
	s := newSink(t, cfg)
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("ping through the proxy: %v", err)
	}

	proxy.Down()
	pingCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := s.Ping(pingCtx)
	cancel()
	if err == nil {
		t.Fatal("ping succeeded while redis was unreachable")
	}
	o := newOutcomes()
	var evs []*outbox.Event
	for i := range 50 {
		e := event("down", fmt.Sprint("agg-", i%3), i)
		evs = append(evs, e)
		o.publish(s, e)
	}
	flushCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err = s.Flush(flushCtx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("flush while redis is unreachable: %v, want a deadline error", err)
	}
	if n := o.count(); n != 0 {
		t.Fatalf("%d events got an outcome while redis was unreachable", n)
	}

	proxy.Up()
	flushCtx, cancel = context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := s.Flush(flushCtx); err != nil {
		t.Fatalf("flush after redis came back: %v", err)
	}
	for i, e := range evs {
		if errs := o.of(e); len(errs) != 1 || errs[0] != nil {
			t.Fatalf("event %d: %v", i, errs)
		}
	}
	entries := r.read(r.prefix + "down")
	if len(entries) != len(evs) {
		t.Fatalf("%d entries, want %d", len(entries), len(evs))
	}
	for i, en := range entries {
		if en.Fields["id"] != evs[i].ID {
			t.Fatalf("entry %d is %s, want %s (publish order)", i, en.Fields["id"], evs[i].ID)
		}
	}

	proxy.Down()
	stuck := event("down", "agg-0", 99)
	o.publish(s, stuck)
	s.Close()
	errs := o.of(stuck)
	if len(errs) != 1 || !errors.Is(errs[0], redis.ErrClosed) || sink.IsEventError(errs[0]) {
		t.Fatalf("event in flight at Close: %v, want ErrClosed, not an event error", errs)
	}
	after := event("down", "agg-0", 100)
	o.publish(s, after)
	if errs := o.of(after); len(errs) != 1 || !errors.Is(errs[0], redis.ErrClosed) {
		t.Fatalf("event published after Close: %v, want ErrClosed", errs)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("flush after close: %v", err)
	}
}

// The fault: Publish waited while MaxBufferedEvents events awaited Redis, on the
// relay's goroutine that reads the WAL, so an unreachable server with the queue full
// (a replay's events, the poller's) stopped the stream. Publish returns at once
// however many events wait, and they are appended in publish order once Redis is back.
func TestPublishBlockedWhileRedisIsUnreachable(t *testing.T) {
	t.Parallel()
	r := newTestRedis(t)
	proxy := testenv.NewProxy(t, r.addr())
	cfg := r.config()
	cfg.URL = "redis://" + proxy.Addr() + "/0"
	cfg.MaxBufferedEvents = 10 // the bound Publish used to wait at
	s := newSink(t, cfg)
	proxy.Down()
	o := newOutcomes()
	evs := make([]*outbox.Event, 100)
	for i := range evs {
		evs[i] = event("bound", "b", i)
	}
	returned := make(chan struct{})
	go func() {
		for _, e := range evs {
			o.publish(s, e)
		}
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatalf("Publish did not return within 10s while redis was unreachable (%d outcomes)", o.count())
	}
	if n := o.count(); n != 0 {
		t.Fatalf("%d events got an outcome while redis was unreachable", n)
	}
	proxy.Up()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	entries := r.read(r.prefix + "bound")
	if o.count() != len(evs) || len(entries) != len(evs) {
		t.Fatalf("%d outcomes, %d entries; want %d each", o.count(), len(entries), len(evs))
	}
	for i, en := range entries {
		if en.Fields["id"] != evs[i].ID {
			t.Fatalf("entry %d is %s, want %s (publish order)", i, en.Fields["id"], evs[i].ID)
		}
	}
}

// A Redis that accepts connections and never answers (a hung server, a network that
// swallows replies) does not hold Ping past its context: the relay's broker probe
// bounds each probe by the ack timeout that way.
func TestPingOfSilentServerEndsWithItsContext(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			go func() { _, _ = io.Copy(io.Discard, c) }() // reads every request, answers none
		}
	}()
	cfg := redis.DefaultConfig()
	cfg.URL = "redis://" + ln.Addr().String() + "/0"
	snk := newSink(t, cfg)
	const limit = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	started := time.Now()
	err = snk.Ping(ctx)
	took := time.Since(started)
	if err == nil {
		t.Fatal("Ping of a server that never answers succeeded")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Ping: %v, want its context's deadline", err)
	}
	if took > limit+500*time.Millisecond {
		t.Errorf("Ping returned after %s, its context ended after %s", took.Round(time.Millisecond), limit)
	}
}
