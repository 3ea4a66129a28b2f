package nats_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
	natssink "github.com/walrelay/walrelay/sink/nats"
)

var _ sink.Sink = (*natssink.Sink)(nil)

func event(id, aggregateType string) *outbox.Event {
	return &outbox.Event{
		ID: id, AggregateType: aggregateType, AggregateID: "agg-1", EventType: "thing.happened",
		Payload: []byte(`{"n": 1}`), CreatedAt: time.Now(),
	}
}

func flush(t *testing.T, s *natssink.Sink) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(*natssink.Config)
		wantErr string
	}{
		{"defaults", func(*natssink.Config) {}, ""},
		{"zero fields take defaults", func(c *natssink.Config) { *c = natssink.Config{URL: "nats://h:4222"} }, ""},
		{"no url", func(c *natssink.Config) { c.URL = "" }, "url is required"},
		{"bad template", func(c *natssink.Config) { c.SubjectTemplate = "outbox.{nope}" }, "unknown placeholder"},
		{"no prefix to create a stream from", func(c *natssink.Config) { c.SubjectTemplate = "{aggregate_type}.events" }, "no literal prefix"},
		{"no prefix, stream made elsewhere", func(c *natssink.Config) {
			c.SubjectTemplate = "{aggregate_type}.events"
			c.CreateStream = false
		}, ""},
		{"stream name with a dot", func(c *natssink.Config) { c.Stream = "out.box" }, "stream name"},
		{"negative dedup window", func(c *natssink.Config) { c.DedupWindow = -time.Second }, "dedup window"},
		{"negative max pending", func(c *natssink.Config) { c.MaxPending = -1 }, "max pending"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := natssink.DefaultConfig()
			tc.change(&cfg)
			err := cfg.Validate()
			if tc.wantErr == "" && err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// The same event published twice is stored once (Nats-Msg-Id), and both
// publishes are acknowledged.
func TestDedup(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := newSink(t, f.config())
	c := newCollector()
	first := event("0b9d3f8e-0000-4000-8000-000000000001", "order")
	second := event("0b9d3f8e-0000-4000-8000-000000000002", "order")
	s.Publish(first, c.done(first.ID))
	s.Publish(first, c.done(first.ID))
	s.Publish(second, c.done(second.ID))
	if !c.wait(t, 3, 10*time.Second) {
		t.Fatal("no outcome for every publish within 10s")
	}
	for _, id := range []string{first.ID, second.ID} {
		for _, err := range c.get(id) {
			if err != nil {
				t.Errorf("event %s: %v", id, err)
			}
		}
	}
	// The duplicate again, after the first was stored.
	s.Publish(first, c.done(first.ID))
	flush(t, s)
	if errs := c.get(first.ID); len(errs) != 3 || errs[2] != nil {
		t.Fatalf("outcomes for the repeated event: %v", errs)
	}
	msgs := f.messages(t)
	if len(msgs) != 2 {
		t.Fatalf("stream holds %d messages, want 2", len(msgs))
	}
	if msgs[0].Header.Get("id") != first.ID || msgs[1].Header.Get("id") != second.ID {
		t.Fatalf("stream holds %s, %s", msgs[0].Header.Get("id"), msgs[1].Header.Get("id"))
	}
}

// Failures about one event come back promptly as *sink.EventError; the sink
// keeps publishing other events.
func TestEventErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := f.config()
	cfg.SubjectTemplate = f.prefix + ".in.{aggregate_type}" // the stream captures <prefix>.in.>
	s := newSink(t, cfg)

	elsewhere := cfg
	elsewhere.SubjectTemplate = f.prefix + ".out.{aggregate_type}" // no stream captures these
	// CreateStream on: the stream exists under that name, so it is left alone.
	outside := newSink(t, elsewhere)
	elsewhere.CreateStream = false
	outsideNoCreate := newSink(t, elsewhere)

	// A stream of its own with a small max_msg_size.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	small := f.stream + "_SMALL"
	if _, err := f.js.CreateStream(ctx, jetstream.StreamConfig{Name: small, Subjects: []string{f.prefix + ".small.>"}, MaxMsgSize: 512}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.js.DeleteStream(context.Background(), small) })
	smallCfg := cfg
	smallCfg.Stream = small
	smallCfg.CreateStream = false
	smallCfg.SubjectTemplate = f.prefix + ".small.{aggregate_type}"
	toSmall := newSink(t, smallCfg)
	big := event("big", "order")
	big.Payload = []byte(`"` + strings.Repeat("x", 1024) + `"`)

	huge := event("huge", "order")
	huge.Payload = []byte(`"` + strings.Repeat("x", int(f.nc.MaxPayload())) + `"`)

	for _, tc := range []struct {
		name  string
		sink  *natssink.Sink
		event *outbox.Event
		want  string
	}{
		{"no stream captures the subject", outside, event("outside", "order"), "no stream captures"},
		{"no stream captures the subject, no create", outsideNoCreate, event("outside-nc", "order"), "no stream captures"},
		{"invalid subject", s, event("spaces", "my order"), "invalid subject"},
		{"wildcard subject", s, event("wild", "*"), "invalid subject"},
		{"over max_payload", s, huge, "maximum payload"},
		{"over the stream's max_msg_size", toSmall, big, "message size exceeds maximum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCollector()
			start := time.Now()
			tc.sink.Publish(tc.event, c.done(tc.event.ID))
			if !c.wait(t, 1, 5*time.Second) {
				t.Fatal("no outcome within 5s")
			}
			err := c.get(tc.event.ID)[0]
			var ee *sink.EventError
			if !errors.As(err, &ee) {
				t.Fatalf("outcome %v (%T), want a *sink.EventError", err, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			t.Logf("after %s: %v", time.Since(start).Round(time.Millisecond), err)
		})
	}

	// The sinks still publish.
	c := newCollector()
	ok := event("fine", "order")
	s.Publish(ok, c.done(ok.ID))
	flush(t, s)
	if errs := c.get(ok.ID); len(errs) != 1 || errs[0] != nil {
		t.Fatalf("event after the failures: %v", errs)
	}
	if n := f.count(t); n != 1 {
		t.Fatalf("stream holds %d messages, want 1", n)
	}
}

// Far more events than MaxPending: Publish never blocks for long, every event is
// acknowledged, in order.
func TestMaxPending(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := f.config()
	cfg.MaxPending = 16
	s := newSink(t, cfg)
	c := newCollector()
	const n = 3000
	start := time.Now()
	var slowest time.Duration
	for i := range n {
		ev := event(fmt.Sprintf("ev-%05d", i), "order")
		t0 := time.Now()
		s.Publish(ev, c.done(ev.ID))
		slowest = max(slowest, time.Since(t0))
	}
	published := time.Since(start)
	flush(t, s)
	t.Logf("%d events: published in %s (slowest Publish %s), all acked after %s", n, published, slowest, time.Since(start))
	if slowest > 100*time.Millisecond {
		t.Errorf("a Publish call took %s", slowest)
	}
	for i := range n {
		id := fmt.Sprintf("ev-%05d", i)
		if errs := c.get(id); len(errs) != 1 || errs[0] != nil {
			t.Fatalf("event %s: outcomes %v", id, errs)
		}
	}
	msgs := f.messages(t)
	if len(msgs) != n {
		t.Fatalf("stream holds %d messages, want %d", len(msgs), n)
	}
	for i, m := range msgs {
		if want := fmt.Sprintf("ev-%05d", i); m.Header.Get("id") != want {
			t.Fatalf("stream seq %d holds %s, want %s", m.Sequence, m.Header.Get("id"), want)
		}
	}
}

// Ping creates the stream with CreateStream and explains a missing one without.
func TestPing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	cfg := f.config()
	cfg.CreateStream = false
	s := newSink(t, cfg)
	if err := s.Ping(ctx); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Ping without the stream = %v, want it to say the stream does not exist", err)
	}

	cfg.CreateStream = true
	cfg.DedupWindow = 90 * time.Second
	s2 := newSink(t, cfg) // New creates it
	if err := s2.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	st, err := f.js.Stream(ctx, f.stream)
	if err != nil {
		t.Fatal(err)
	}
	info := st.CachedInfo()
	if got, want := info.Config.Subjects, []string{f.prefix + ".>"}; len(got) != 1 || got[0] != want[0] {
		t.Errorf("stream subjects %v, want %v", got, want)
	}
	if info.Config.Duplicates != 90*time.Second || info.Config.Storage != jetstream.FileStorage {
		t.Errorf("stream duplicates %s, storage %s", info.Config.Duplicates, info.Config.Storage)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping once the stream exists: %v", err)
	}
}

// After Close, events fail with a broker-level error, and Flush does not wait.
func TestClose(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := newSink(t, f.config())
	c := newCollector()
	ev := event("before-close", "order")
	s.Publish(ev, c.done(ev.ID))
	flush(t, s)
	s.Close()
	late := event("after-close", "order")
	s.Publish(late, c.done(late.ID))
	if !c.wait(t, 2, 5*time.Second) {
		t.Fatal("no outcome after Close")
	}
	err := c.get(late.ID)[0]
	if err == nil || sink.IsEventError(err) {
		t.Fatalf("publish after Close: %v, want a broker-level error", err)
	}
	flush(t, s)
}
