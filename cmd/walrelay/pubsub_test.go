package main_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
)

// pubsubFake is Pub/Sub's fake (pstest) in the test process, on a free loopback
// port, reached by the relay binary over gRPC (--pubsub-emulator-host). The fake
// enforces neither ordering nor Pub/Sub's request rules: it stores messages in
// arrival order, and its recorder checks the rule of the real service that every
// request carries one ordering key, the aggregate id of each of its messages.
type pubsubFake struct {
	srv *pstest.Server
	mu  sync.Mutex
	bad []string // requests that broke the rule
}

const pubsubProject = "walrelay-test"

func newPubSubFake(t *testing.T, topics ...string) *pubsubFake {
	t.Helper()
	f := &pubsubFake{}
	f.srv = pstest.NewServerWithAddress("127.0.0.1:0", pstest.ServerReactorOption{FuncName: "Publish", Reactor: f})
	t.Cleanup(func() { _ = f.srv.Close() })
	for _, topic := range topics {
		if _, err := f.srv.GServer.CreateTopic(context.Background(), &pb.Topic{Name: "projects/" + pubsubProject + "/topics/" + topic}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, b := range f.bad {
			if i < 10 {
				t.Errorf("publish request: %s", b)
			}
		}
	})
	return f
}

// React checks a publish request and lets the fake handle it.
func (f *pubsubFake) React(req any) (bool, any, error) {
	if pr, ok := req.(*pb.PublishRequest); ok {
		for _, m := range pr.Messages {
			if m.OrderingKey != pr.Messages[0].OrderingKey || m.OrderingKey != m.Attributes["aggregate_id"] {
				f.mu.Lock()
				f.bad = append(f.bad, fmt.Sprintf("%d messages; ordering key %q beside %q, aggregate_id %q",
					len(pr.Messages), m.OrderingKey, pr.Messages[0].OrderingKey, m.Attributes["aggregate_id"]))
				f.mu.Unlock()
			}
		}
	}
	return false, nil, nil
}

// delivered counts the stored messages per event id, and lists each aggregate's
// first deliveries in the order stored.
func (f *pubsubFake) delivered() (count map[string]int, firsts map[string][]string) {
	count, firsts = map[string]int{}, map[string][]string{}
	for _, m := range f.srv.Messages() {
		id := m.Attributes["id"]
		if count[id]++; count[id] == 1 {
			firsts[m.OrderingKey] = append(firsts[m.OrderingKey], id)
		}
	}
	return count, firsts
}

func pubsubEnv(dbURL, slot, addr string, extra ...string) []string {
	return baseEnv(append([]string{"WALRELAY_DATABASE_URL=" + dbURL, "WALRELAY_METRICS_ADDR=", "WALRELAY_LOG_FORMAT=text",
		"WALRELAY_SLOT=" + slot, "WALRELAY_STATUS_INTERVAL=100ms", "WALRELAY_SINK=pubsub",
		"WALRELAY_PUBSUB_PROJECT=" + pubsubProject, "WALRELAY_PUBSUB_EMULATOR_HOST=" + addr}, extra...)...)
}

// 12,000 events through three SIGKILLs of the relay binary publishing to Pub/Sub:
// every committed event, row or table-less, is stored, the first deliveries of each
// aggregate are in commit order, and the repeats the kills cause are counted.
func TestPubSubCrashLosesNothing(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	f := newPubSubFake(t, "outbox.event.order")
	slot := slotName(t, "")
	env := pubsubEnv(dbURL, slot, f.srv.Addr)

	crashLosesNothing(t, "pubsub", dbURL, slot, env, 12000, f.delivered)
}

// An event larger than Pub/Sub's 10 MB is refused before it is sent, handed to the
// poller and, after --max-attempts, a dead letter with the reason. The later events
// of its aggregate are stored once each in commit order (the sink sends them only
// once the refused one is settled: TestLaterEventsWaitForARefusedOne in sink/pubsub
// shows the timing), and another aggregate is not held.
func TestPubSubDeadLetterTooLarge(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	f := newPubSubFake(t, "outbox.event.order")
	slot := slotName(t, "")
	conn := testenv.Connect(t, dbURL)
	env := pubsubEnv(dbURL, slot, f.srv.Addr, "WALRELAY_MAX_ATTEMPTS=2", "WALRELAY_RETRY_BACKOFF_MIN=100ms",
		"WALRELAY_RETRY_BACKOFF_MAX=200ms", "WALRELAY_POLL_INTERVAL=200ms")
	relay := startProc(t, "relay", env, "run")
	waitStreaming(t, conn, slot, relay)

	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	huge := outbox.Event{AggregateType: "order", AggregateID: "big", EventType: "order.huge",
		Payload: []byte(`"` + strings.Repeat("x", 10_000_000) + `"`)}
	events := []*outbox.Event{&huge}
	for i := range 3 {
		events = append(events, &outbox.Event{AggregateType: "order", AggregateID: "big", EventType: "order.after", Payload: fmt.Appendf(nil, `{"n": %d}`, i)})
	}
	other := outbox.Event{AggregateType: "order", AggregateID: "other", EventType: "order.other", Payload: []byte(`{}`)}
	events = append(events, &other)
	for _, e := range events {
		if err := outbox.Write(ctx, tx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var reason string
	var attempts int
	testenv.WaitFor(t, time.Minute, "the huge event in outbox_events_dead_letters", func() bool {
		err := conn.QueryRow(ctx, "SELECT attempts, last_error FROM outbox_events_dead_letters WHERE id = $1", huge.ID).Scan(&attempts, &reason)
		return err == nil
	})
	if attempts != 2 || !strings.Contains(reason, "10 MB") {
		t.Errorf("dead letter after %d attempts, reason %q; want 2 attempts and the 10 MB limit named", attempts, reason)
	}
	testenv.WaitFor(t, 30*time.Second, "the other events stored", func() bool { c, _ := f.delivered(); return len(c) == 4 })
	relay.stop(15 * time.Second)
	count, firsts := f.delivered()
	if want := []string{events[1].ID, events[2].ID, events[3].ID}; !slices.Equal(firsts["big"], want) {
		t.Errorf("aggregate big stored %v, want %v", firsts["big"], want)
	}
	for _, e := range events[1:] {
		if count[e.ID] != 1 {
			t.Errorf("event %s stored %d times, want once", e.ID, count[e.ID])
		}
	}
	if count[huge.ID] != 0 {
		t.Errorf("the huge event was stored")
	}
}
