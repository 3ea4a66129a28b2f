package pubsub_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/pubsub"
)

var _ sink.Sink = (*pubsub.Sink)(nil)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(*pubsub.Config)
		wantErr string
	}{
		{"defaults with a project", func(*pubsub.Config) {}, ""},
		{"no project", func(c *pubsub.Config) { c.Project = "" }, "project is required"},
		{"bad template", func(c *pubsub.Config) { c.TopicTemplate = "outbox.{nope}" }, "unknown placeholder"},
		{"template renders no topic ID", func(c *pubsub.Config) { c.TopicTemplate = "outbox/{aggregate_type}" }, `'/' is not allowed`},
		{"template starts with goog", func(c *pubsub.Config) { c.TopicTemplate = "google.{aggregate_type}" }, "reserved"},
		{"endpoint without port", func(c *pubsub.Config) { c.Endpoint = "pubsub.googleapis.com" }, "not host:port"},
		{"locational endpoint", func(c *pubsub.Config) { c.Endpoint = "us-east1-pubsub.googleapis.com:443" }, ""},
		{"emulator", func(c *pubsub.Config) { c.EmulatorHost = "127.0.0.1:8085" }, ""},
		{"emulator and endpoint", func(c *pubsub.Config) { c.EmulatorHost, c.Endpoint = "127.0.0.1:8085", "x:443" }, "takes neither"},
		{"missing credentials file", func(c *pubsub.Config) { c.CredentialsFile = "/nonexistent/key.json" }, "credentials file"},
		{"batch count over 1000", func(c *pubsub.Config) { c.Publish.CountThreshold = 1001 }, "batch count"},
		{"short timeout", func(c *pubsub.Config) { c.Publish.Timeout = time.Millisecond }, "publish timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := pubsub.DefaultConfig()
			cfg.Project = project
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

// The message: the payload as data; id, event_type, aggregate_type, aggregate_id,
// created_at and the headers from columns as attributes; the aggregate id as the
// ordering key; a NULL payload is empty data with tombstone=true. Every request
// carries one ordering key (Pub/Sub's rule), the one of its messages.
func TestMessages(t *testing.T) {
	t.Parallel()
	f, topic, s := start(t, nil)
	placed := event("order", "o-1")
	placed.Headers = []outbox.Header{{Key: "tenant", Value: "acme"}, {Key: "traceparent", Value: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
	tomb := event("order", "o-1")
	tomb.Payload, tomb.NullPayload = nil, true
	other := event("order", "o-2")
	o := newOutcomes()
	for _, e := range []*outbox.Event{placed, tomb, other} {
		o.publish(s, e)
	}
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, e := range []*outbox.Event{placed, tomb, other} {
		if errs := o.of(e.ID); len(errs) != 1 || errs[0] != nil {
			t.Fatalf("event %s: outcomes %v", e.ID, errs)
		}
	}
	msgs := f.messages(topic)
	if got := ids(msgs); len(got) != 3 {
		t.Fatalf("topic holds %v, want the 3 events", got)
	}
	byID := map[string]int{}
	for i, m := range msgs {
		byID[m.Attributes["id"]] = i
	}
	m := msgs[byID[placed.ID]]
	want := map[string]string{"id": placed.ID, "event_type": placed.EventType, "aggregate_type": "order", "aggregate_id": "o-1",
		"created_at": placed.CreatedAt.Format(time.RFC3339Nano), "tenant": "acme", "traceparent": placed.Headers[1].Value}
	if !mapsEqual(m.Attributes, want) || string(m.Data) != string(placed.Payload) || m.OrderingKey != "o-1" {
		t.Errorf("message: attributes %v, data %q, ordering key %q; want %v, %q, o-1", m.Attributes, m.Data, m.OrderingKey, want, placed.Payload)
	}
	if m := msgs[byID[tomb.ID]]; len(m.Data) != 0 || m.Attributes["tombstone"] != "true" || m.OrderingKey != "o-1" {
		t.Errorf("tombstone: attributes %v, data %q", m.Attributes, m.Data)
	}
	if byID[placed.ID] > byID[tomb.ID] {
		t.Errorf("o-1's events stored out of publish order: %v", ids(msgs))
	}
	for _, r := range f.requestsWith(other.ID) {
		for i, k := range r.keys {
			if k != "o-2" {
				t.Errorf("a request carrying o-2 has a message (%s) with ordering key %q", r.ids[i], k)
			}
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// What Pub/Sub refuses for what the event is comes back as *sink.EventError:
// the sink's own checks of Pub/Sub's limits before sending, and the service's
// refusals (here a topic that does not exist, and a request the fake refuses as a
// topic with a schema would). Other events keep flowing.
func TestEventErrors(t *testing.T) {
	t.Parallel()
	f, topic, s := start(t, nil)
	schema := event("order", "o-schema")
	f.setRefuse(func(r *pb.PublishRequest) error {
		for _, m := range r.Messages {
			if m.Attributes["id"] == schema.ID {
				return status.Error(codes.InvalidArgument, "Request contains an invalid argument: message does not match the topic's schema")
			}
		}
		return nil
	})
	tooLarge := event("order", "o-big")
	tooLarge.Payload = big(10_000_001)
	manyHeaders := event("order", "o-headers")
	for i := range 100 {
		manyHeaders.Headers = append(manyHeaders.Headers, outbox.Header{Key: fmt.Sprintf("h%d", i), Value: "v"})
	}
	longValue := event("order", "o-value")
	longValue.Headers = []outbox.Header{{Key: "note", Value: strings.Repeat("n", 1025)}}
	reserved := event("order", "o-goog")
	reserved.Headers = []outbox.Header{{Key: "googtrace", Value: "x"}}
	longKey := event("order", strings.Repeat("k", 1025))
	badTopic := event("my order", "o-topic")
	missing := event("nowhere", "o-missing")

	for _, tc := range []struct {
		name string
		ev   *outbox.Event
		want string
	}{
		{"over 10 MB", tooLarge, "more than Pub/Sub's 10 MB"},
		{"over 100 attributes", manyHeaders, "105 attributes, at most 100"},
		{"attribute value over 1024 bytes", longValue, "attribute note is 1025 bytes"},
		{"reserved attribute key", reserved, "keys starting with goog are reserved"},
		{"ordering key over 1 KB", longKey, "ordering key"},
		{"topic ID", badTopic, "not allowed in a topic ID"},
		{"topic does not exist", missing, "NotFound"},
		{"refused by the topic's schema", schema, "InvalidArgument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOutcomes()
			o.publish(s, tc.ev)
			o.wait(t, 1)
			err := o.of(tc.ev.ID)[0]
			if !sink.IsEventError(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("outcome %v, want an *sink.EventError saying %q", err, tc.want)
			}
		})
	}
	o := newOutcomes()
	fine := event("order", "o-fine")
	o.publish(s, fine)
	o.wait(t, 1)
	if errs := o.of(fine.ID); errs[0] != nil {
		t.Fatalf("event after the refusals: %v", errs[0])
	}
	if got := ids(f.messages(topic)); !slices.Equal(got, []string{fine.ID}) {
		t.Fatalf("topic holds %v, want only %s", got, fine.ID)
	}
}

// The ordering rule (order.go): an event the service refuses while later events of
// its aggregate wait behind it in the client. Those come back paused; they are sent
// again only after the refused one got its done (an event error), once each, in
// order.
func TestLaterEventsWaitForARefusedOne(t *testing.T) {
	t.Parallel()
	f, topic, s := start(t, nil)
	refused, b, c := event("order", "agg"), event("order", "agg"), event("order", "agg")
	released, release := holdUntil(t)
	f.setRefuse(func(r *pb.PublishRequest) error {
		if r.Messages[0].Attributes["id"] == refused.ID {
			<-released // held until the later events are in the client, behind it
			return status.Error(codes.InvalidArgument, "message does not match the topic's schema")
		}
		return nil
	})
	o := newOutcomes()
	o.publish(s, refused)
	testenv.WaitFor(t, 10*time.Second, "the refused event's request", func() bool { return len(f.requestsWith(refused.ID)) > 0 })
	o.publish(s, b)
	o.publish(s, c)
	time.Sleep(50 * time.Millisecond) // past the batch delay: b and c wait in the client behind the refused one
	release()
	o.wait(t, 3)

	if err := o.of(refused.ID)[0]; !sink.IsEventError(err) {
		t.Fatalf("refused event: %v, want an *sink.EventError", err)
	}
	for _, e := range []*outbox.Event{b, c} {
		if errs := o.of(e.ID); len(errs) != 1 || errs[0] != nil {
			t.Fatalf("event %s: outcomes %v, want one nil", e.ID, errs)
		}
	}
	var agg []string
	for _, m := range f.messages(topic) {
		if m.OrderingKey == "agg" {
			agg = append(agg, m.Attributes["id"])
		}
	}
	if !slices.Equal(agg, []string{b.ID, c.ID}) {
		t.Errorf("aggregate agg stored %v, want %s then %s, once each", agg, b.ID, c.ID)
	}
	settled := o.when(refused.ID)
	for _, r := range f.requestsWith(b.ID) {
		if r.at.Before(settled) {
			t.Errorf("a request carrying %s reached Pub/Sub at %s, before the refused event was settled at %s",
				b.ID, r.at.Format(time.StampMicro), settled.Format(time.StampMicro))
		}
	}
}

// Events refused together in one request: the request cannot say which one is at
// fault, so each is sent again alone, and only the one refused alone fails.
func TestRefusedTogetherAreSentAlone(t *testing.T) {
	t.Parallel()
	f, topic, s := start(t, nil)
	gate, bad, b, c := event("order", "agg"), event("order", "agg"), event("order", "agg"), event("order", "agg")
	released, release := holdUntil(t)
	f.setRefuse(func(r *pb.PublishRequest) error {
		for _, m := range r.Messages {
			switch m.Attributes["id"] {
			case gate.ID:
				<-released // the next three gather in one request behind it
			case bad.ID:
				return status.Error(codes.InvalidArgument, "message does not match the topic's schema")
			}
		}
		return nil
	})
	o := newOutcomes()
	o.publish(s, gate)
	testenv.WaitFor(t, 10*time.Second, "the gate's request", func() bool { return len(f.requestsWith(gate.ID)) > 0 })
	for _, e := range []*outbox.Event{bad, b, c} {
		o.publish(s, e)
	}
	time.Sleep(50 * time.Millisecond) // past the batch delay, so the three are one bundle in the client
	release()
	o.wait(t, 4)

	together := false
	for _, r := range f.requestsWith(bad.ID) {
		together = together || slices.Equal(r.ids, []string{bad.ID, b.ID, c.ID})
	}
	if !together {
		t.Fatalf("the three events never went in one request: %v", f.requestsWith(bad.ID))
	}
	if err := o.of(bad.ID)[0]; !sink.IsEventError(err) {
		t.Fatalf("refused event: %v, want an *sink.EventError", err)
	}
	for _, e := range []*outbox.Event{gate, b, c} {
		if errs := o.of(e.ID); len(errs) != 1 || errs[0] != nil {
			t.Errorf("event %s: outcomes %v, want one nil", e.ID, errs)
		}
	}
	if got := ids(f.messages(topic)); !slices.Equal(got, []string{gate.ID, b.ID, c.ID}) {
		t.Errorf("topic holds %v, want gate, b, c once each", got)
	}
}

// The service failing an event with an error the client does not retry (here its
// credentials refused, three times): the sink sends it again in its place, with a
// warning; the events behind it wait, and everything is stored once, in order.
// Another aggregate is not held meanwhile.
func TestServiceFailureRetriedInPlace(t *testing.T) {
	t.Parallel()
	logs := &testenv.LogBuffer{}
	f, topic, s := start(t, func(cfg *pubsub.Config) { cfg.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	first, b, c := event("order", "agg"), event("order", "agg"), event("order", "agg")
	refusals := 0
	f.setRefuse(func(r *pb.PublishRequest) error {
		if r.Messages[0].Attributes["id"] == first.ID && refusals < 3 {
			refusals++
			return status.Error(codes.Unauthenticated, "request had invalid authentication credentials")
		}
		return nil
	})
	other := event("order", "other")
	o := newOutcomes()
	for _, e := range []*outbox.Event{first, b, c} {
		o.publish(s, e)
	}
	testenv.WaitFor(t, 10*time.Second, "the first refusal", func() bool { return len(f.requestsWith(first.ID)) > 0 })
	o.publish(s, other)
	o.wait(t, 4)
	if !o.when(other.ID).Before(o.when(first.ID)) {
		t.Errorf("the other aggregate's event was stored only after the retried one")
	}
	for _, e := range []*outbox.Event{first, b, c, other} {
		if errs := o.of(e.ID); len(errs) != 1 || errs[0] != nil {
			t.Errorf("event %s: outcomes %v, want one nil", e.ID, errs)
		}
	}
	var agg []string
	for _, m := range f.messages(topic) {
		if m.OrderingKey == "agg" {
			agg = append(agg, m.Attributes["id"])
		}
	}
	if !slices.Equal(agg, []string{first.ID, b.ID, c.ID}) {
		t.Errorf("aggregate agg stored %v, want the three once each in order", agg)
	}
	if n := len(f.requestsWith(first.ID)); n != 4 {
		t.Errorf("%d requests carried the first event, want 4 (3 refused, 1 stored)", n)
	}
	if !strings.Contains(logs.String(), "pubsub unavailable") {
		t.Errorf("no warning logged:\n%s", logs)
	}
}

// Ping succeeds against the fake, and fails, saying so, when nothing answers.
func TestPing(t *testing.T) {
	t.Parallel()
	var proxy *testenv.Proxy
	_, _, s := start(t, func(cfg *pubsub.Config) {
		proxy = testenv.NewProxy(t, cfg.EmulatorHost)
		cfg.EmulatorHost = proxy.Addr()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	proxy.Down()
	short, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	if err := s.Ping(short); err == nil || !strings.Contains(err.Error(), "pubsub ping") {
		t.Fatalf("Ping with the service down = %v, want an error", err)
	}
}

// After Close, events fail with a broker-level error, and Flush does not wait.
func TestClose(t *testing.T) {
	t.Parallel()
	_, _, s := start(t, nil)
	o := newOutcomes()
	before := event("order", "a")
	o.publish(s, before)
	o.wait(t, 1)
	s.Close()
	after := event("order", "a")
	o.publish(s, after)
	o.wait(t, 2)
	if err := o.of(after.ID)[0]; !errors.Is(err, pubsub.ErrClosed) || sink.IsEventError(err) {
		t.Fatalf("publish after Close: %v, want ErrClosed, not an event error", err)
	}
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// holdUntil gives a refusal something to wait on (released) and the test a way to
// end the wait (release), also when the test fails first: the fake answers nothing
// while a refusal waits.
func holdUntil(t *testing.T) (released <-chan struct{}, release func()) {
	ch := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(release)
	return ch, release
}
