package sqs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/internal/testenv/sqsserver"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/sqs"
)

func flush(t *testing.T, s *sqs.Sink, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// The message of an event: the payload as the body, walrelay's attributes, then the
// event's headers; on a FIFO queue the aggregate as the group and the event id as the
// deduplication id (hashed when SQS could not take it). A NULL payload is the body
// "null" with tombstone; a standard queue gets neither group nor deduplication id.
func TestMessages(t *testing.T) {
	t.Parallel()
	srv := sqsserver.Start(t, sqsserver.Options{})
	srv.CreateQueue("orders.fifo", 0)
	srv.CreateQueue("orders", 0)
	s := newSink(t, config(srv, "orders{event_type}"))
	o := newOutcomes()

	placed := event("order", "o-1", 1)
	placed.EventType = ".fifo"
	placed.Headers = []outbox.Header{{Key: "tenant", Value: "acme"}, {Key: "empty", Value: ""},
		{Key: "traceparent", Value: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
	tomb := event("order", "o-1", 2)
	tomb.EventType, tomb.Payload, tomb.NullPayload = ".fifo", nil, true
	odd := event("order", "Müller & Söhne", 3)
	odd.EventType = ".fifo"
	standard := event("order", "o-2", 4)
	standard.EventType = ""
	for _, e := range []*outbox.Event{placed, tomb, odd, standard} {
		o.publish(s, e)
	}
	flush(t, s, 10*time.Second)
	for _, e := range []*outbox.Event{placed, tomb, odd, standard} {
		if errs := o.of(e.ID); len(errs) != 1 || errs[0] != nil {
			t.Fatalf("event %s: %v", e.ID, errs)
		}
	}

	byID := map[string]sqsserver.Message{}
	for _, m := range srv.Messages("orders.fifo") {
		byID[m.Attributes["id"]] = m
	}
	if len(byID) != 3 {
		t.Fatalf("orders.fifo holds %d messages, want 3", len(byID))
	}
	own := func(e *outbox.Event) map[string]string {
		return map[string]string{"id": e.ID, "event_type": e.EventType, "aggregate_type": "order", "aggregate_id": e.AggregateID,
			"created_at": "2024-05-06T05:08:09.123456789Z"}
	}
	want := own(placed)
	want["tenant"], want["traceparent"] = "acme", placed.Headers[2].Value
	if m := byID[placed.ID]; fmt.Sprint(m.Attributes) != fmt.Sprint(want) || m.Body != string(placed.Payload) || m.GroupID != "o-1" || m.DedupID != placed.ID {
		t.Errorf("first message: attributes %v, body %q, group %q, dedup %q; want %v", m.Attributes, m.Body, m.GroupID, m.DedupID, want)
	}
	want = own(tomb)
	want["tombstone"] = "true"
	if m := byID[tomb.ID]; fmt.Sprint(m.Attributes) != fmt.Sprint(want) || m.Body != "null" {
		t.Errorf("tombstone: attributes %v, body %q", m.Attributes, m.Body)
	}
	if m := byID[odd.ID]; !strings.HasPrefix(m.GroupID, "sha256-") || len(m.GroupID) != 71 || m.Attributes["aggregate_id"] != odd.AggregateID {
		t.Errorf("aggregate id SQS cannot take as a group: group %q, aggregate_id %q", m.GroupID, m.Attributes["aggregate_id"])
	}
	std := srv.Messages("orders")
	if len(std) != 1 || std[0].GroupID != "" || std[0].DedupID != "" || std[0].Attributes["id"] != standard.ID {
		t.Errorf("standard queue holds %+v, want the one event without group or deduplication id", std)
	}
	if n := srv.Calls("GetQueueUrl"); n != 2 {
		t.Errorf("GetQueueUrl called %d times for two queues, want 2 (looked up once, then kept)", n)
	}
}

// A message that fails on SQS's side holds its aggregate: it is sent again in place,
// and no later message of its group is sent until SQS took it, while other groups
// keep flowing through the other requests in flight. Order per group holds.
func TestFIFOGroupWaitsForItsFailedMessage(t *testing.T) {
	t.Parallel()
	srv := sqsserver.Start(t, sqsserver.Options{Latency: 2 * time.Millisecond})
	srv.CreateQueue("orders.fifo", 0)
	held := event("order", "slow", 0)
	var throttled atomic.Int64
	var release atomic.Bool
	srv.FailEntries(func(_ string, e *sqsserver.Entry) *sqsserver.Fault {
		if e.DedupID == held.ID && !release.Load() {
			throttled.Add(1)
			return &sqsserver.Fault{Code: "InternalError", Message: "try again later"}
		}
		return nil
	})
	s := newSink(t, config(srv, "orders.fifo"))
	o := newOutcomes()
	var evs []*outbox.Event
	o.publish(s, held)
	evs = append(evs, held)
	for i := 1; i <= 300; i++ {
		agg := "slow"
		if i%3 != 0 {
			agg = fmt.Sprint("fast-", i%7)
		}
		e := event("order", agg, i)
		evs = append(evs, e)
		o.publish(s, e)
	}
	// The other groups drain while the held one is throttled.
	if !waitFor(10*time.Second, func() bool { return srv.Count("orders.fifo") == 200 && throttled.Load() >= 3 }) {
		t.Fatalf("while one group was throttled: %d messages stored (want the other groups' 200), %d throttled attempts",
			srv.Count("orders.fifo"), throttled.Load())
	}
	release.Store(true)
	flush(t, s, 20*time.Second)
	for _, e := range evs {
		if errs := o.of(e.ID); len(errs) != 1 || errs[0] != nil {
			t.Fatalf("event %s: %v", e.ID, errs)
		}
	}
	checkGroupOrder(t, srv, "orders.fifo", evs)
	heldAt := time.Time{}
	for _, r := range srv.Requests() {
		for _, e := range r.Entries {
			if e.DedupID == held.ID && r.Fault == nil {
				heldAt = r.At
			}
			if e.GroupID == "slow" && e.DedupID != held.ID && (heldAt.IsZero() || r.At.Before(heldAt)) {
				t.Fatalf("event %s of the held group was sent before the held event was accepted", e.DedupID)
			}
		}
	}
	if n := srv.GroupOverlaps(); n != 0 {
		t.Errorf("%d requests carried a group whose earlier request was still being answered", n)
	}
	checkOneMessagePerGroup(t, srv.Requests())
}

// checkGroupOrder asserts that the queue holds each published event once and every
// group's events in publish order.
func checkGroupOrder(t *testing.T, srv *sqsserver.Server, queue string, published []*outbox.Event) {
	t.Helper()
	ids := make([]string, len(published))
	for i, e := range published {
		ids[i] = e.ID
	}
	if err := srv.CheckDelivery(queue, ids); err != nil {
		t.Fatal(err)
	}
}

// checkOneMessagePerGroup asserts that no request carried two messages of a group.
func checkOneMessagePerGroup(t *testing.T, reqs []sqsserver.Request) {
	t.Helper()
	for _, r := range reqs {
		groups := map[string]bool{}
		for _, e := range r.Entries {
			if groups[e.GroupID] {
				t.Fatalf("a request carried two messages of group %s", e.GroupID)
			}
			groups[e.GroupID] = true
		}
	}
}

// Events SQS would refuse for what they are fail alone with an *sink.EventError and
// are never sent: larger than the queue's MaximumMessageSize, more attributes than
// SQS allows, an empty payload, a queue name SQS does not allow. The group's later
// events are sent only after the refused one's outcome was given.
func TestRefusedEvents(t *testing.T) {
	t.Parallel()
	srv := sqsserver.Start(t, sqsserver.Options{})
	srv.CreateQueue("orders.fifo", 2048)
	s := newSink(t, config(srv, "orders{aggregate_type}.fifo"))
	o := newOutcomes()
	before := event("", "a", 1)
	large := event("", "a", 2)
	large.Payload = []byte(`{"pad": "` + strings.Repeat("x", 3000) + `"}`)
	many := event("", "a", 3)
	for i := range 7 {
		many.Headers = append(many.Headers, outbox.Header{Key: fmt.Sprint("h", i), Value: "v"})
	}
	empty := event("", "a", 4)
	empty.Payload = []byte{}
	after := event("", "a", 5)
	badQueue := event(".v2", "a", 6)
	evs := []*outbox.Event{before, large, many, empty, after, badQueue}
	for _, e := range evs {
		o.publish(s, e)
	}
	flush(t, s, 10*time.Second)
	for _, tc := range []struct {
		e    *outbox.Event
		want string // "" for success
	}{
		{before, ""}, {large, "MaximumMessageSize"}, {many, "SQS allows 10"}, {empty, "payload is empty"},
		{after, ""}, {badQueue, "invalid queue name"},
	} {
		errs := o.of(tc.e.ID)
		switch {
		case len(errs) != 1:
			t.Errorf("event %s: done called %d times", tc.e.ID, len(errs))
		case tc.want == "" && errs[0] != nil:
			t.Errorf("event %s: %v, want success", tc.e.ID, errs[0])
		case tc.want != "" && (!sink.IsEventError(errs[0]) || !strings.Contains(errs[0].Error(), tc.want)):
			t.Errorf("event %s: %v, want an event error naming %q", tc.e.ID, errs[0], tc.want)
		}
	}
	if got := ids(srv.Messages("orders.fifo")); !slices.Equal(got, []string{before.ID, after.ID}) {
		t.Fatalf("queue holds %v, want only the two valid events", got)
	}
	var afterSent time.Time
	for _, r := range srv.Requests() {
		for _, e := range r.Entries {
			if e.DedupID == after.ID {
				afterSent = r.At
			}
			if e.DedupID != before.ID && e.DedupID != after.ID {
				t.Errorf("refused event %s was sent", e.DedupID)
			}
		}
	}
	for _, e := range []*outbox.Event{large, many, empty} {
		if !o.when(e.ID).Before(afterSent) {
			t.Errorf("the group's later event was sent before refused event %s was settled", e.ID)
		}
	}
}

// Each entry's own result is its event's outcome: an entry SQS refuses as the
// sender's fault is an *sink.EventError, one failed on SQS's side is sent again in
// place (its group waits) and then accepted; the rest of the request is accepted.
func TestEntryResults(t *testing.T) {
	t.Parallel()
	srv := sqsserver.Start(t, sqsserver.Options{})
	srv.CreateQueue("orders.fifo", 0)
	bad, flaky := event("order", "b", 1), event("order", "f", 2)
	var flakyFailures atomic.Int64
	srv.FailEntries(func(_ string, e *sqsserver.Entry) *sqsserver.Fault {
		switch {
		case e.DedupID == bad.ID:
			return &sqsserver.Fault{Code: "InvalidParameterValue", Message: "no", Sender: true}
		case e.DedupID == flaky.ID && flakyFailures.Add(1) <= 2:
			return &sqsserver.Fault{Code: "InternalError", Message: "try again"}
		}
		return nil
	})
	cfg := config(srv, "orders.fifo")
	cfg.Linger = 200 * time.Millisecond // the first five go in one request
	s := newSink(t, cfg)
	o := newOutcomes()
	evs := []*outbox.Event{event("order", "x", 0), bad, flaky, event("order", "y", 3), event("order", "z", 4), event("order", "f", 5)}
	for _, e := range evs {
		o.publish(s, e)
	}
	flush(t, s, 10*time.Second)
	for _, e := range evs {
		errs := o.of(e.ID)
		if e == bad {
			if len(errs) != 1 || !sink.IsEventError(errs[0]) || !strings.Contains(errs[0].Error(), "InvalidParameterValue") {
				t.Errorf("refused entry: %v, want an event error naming the code", errs)
			}
			continue
		}
		if len(errs) != 1 || errs[0] != nil {
			t.Errorf("event %s: %v, want success", e.ID, errs)
		}
	}
	checkGroupOrder(t, srv, "orders.fifo", slices.DeleteFunc(slices.Clone(evs), func(e *outbox.Event) bool { return e == bad }))
	if got := srv.Requests()[0].Entries; len(got) != 5 {
		t.Errorf("first request carried %d entries, want 5 (one per group)", len(got))
	}
}

// A request SQS refuses as a whole for what it carries is sent again one entry per
// request: the culprit fails alone with an *sink.EventError, the others are accepted.
func TestRequestRefusedSplits(t *testing.T) {
	t.Parallel()
	srv := sqsserver.Start(t, sqsserver.Options{})
	srv.CreateQueue("orders.fifo", 0)
	culprit := event("order", "c", 2)
	srv.FailRequests(func(r *sqsserver.Request) *sqsserver.Fault {
		for _, e := range r.Entries {
			if e.DedupID == culprit.ID {
				return &sqsserver.Fault{Status: 400, Code: "InvalidParameterValue", Message: "one of them", Sender: true}
			}
		}
		return nil
	})
	cfg := config(srv, "orders.fifo")
	cfg.Linger = 200 * time.Millisecond
	s := newSink(t, cfg)
	o := newOutcomes()
	evs := []*outbox.Event{event("order", "a", 1), culprit, event("order", "b", 3)}
	for _, e := range evs {
		o.publish(s, e)
	}
	flush(t, s, 10*time.Second)
	if errs := o.of(culprit.ID); len(errs) != 1 || !sink.IsEventError(errs[0]) {
		t.Fatalf("culprit: %v, want an event error", errs)
	}
	for _, e := range []*outbox.Event{evs[0], evs[2]} {
		if errs := o.of(e.ID); len(errs) != 1 || errs[0] != nil {
			t.Fatalf("event %s: %v, want success", e.ID, errs)
		}
	}
	if n := srv.Count("orders.fifo"); n != 2 {
		t.Fatalf("queue holds %d messages, want 2", n)
	}
}

// A queue that does not exist fails its events with an *sink.EventError naming what
// to do; refused credentials fail them with a plain error (the broker is
// unavailable, nothing is handed over).
func TestQueueAndCredentialErrors(t *testing.T) {
	t.Parallel()
	srv := sqsserver.Start(t, sqsserver.Options{})
	srv.CreateQueue("denied.fifo", 0)
	srv.FailRequests(func(r *sqsserver.Request) *sqsserver.Fault {
		return &sqsserver.Fault{Status: 403, Code: "InvalidClientTokenId", Message: "The security token included in the request is invalid.", Sender: true}
	})
	s := newSink(t, config(srv, "{aggregate_type}.fifo"))
	o := newOutcomes()
	missing, denied := event("missing", "a", 1), event("denied", "a", 2)
	o.publish(s, missing)
	o.publish(s, denied)
	flush(t, s, 10*time.Second)
	if errs := o.of(missing.ID); len(errs) != 1 || !sink.IsEventError(errs[0]) || !strings.Contains(errs[0].Error(), "create the queue") {
		t.Errorf("missing queue: %v, want an event error saying to create the queue", errs)
	}
	if errs := o.of(denied.ID); len(errs) != 1 || errs[0] == nil || sink.IsEventError(errs[0]) || !strings.Contains(errs[0].Error(), "credentials") {
		t.Errorf("refused credentials: %v, want a plain error about the credentials", errs)
	}
	if err := s.Ping(context.Background()); err != nil {
		t.Errorf("ping with placeholders in the template: %v, want nil (sqs answered)", err)
	}
}

// While SQS is unreachable nothing gets an outcome, Flush waits and Ping fails; when
// it is back every event is stored once (FIFO deduplication drops what a lost answer
// made the sink send again), in order per group. Close fails what is left with
// ErrClosed, which is not an event error.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	srv := sqsserver.Start(t, sqsserver.Options{})
	srv.CreateQueue("orders.fifo", 0)
	proxy := testenv.NewProxy(t, srv.Addr)
	cfg := config(srv, "orders.fifo")
	cfg.Endpoint = "http://" + proxy.Addr()
	s := newSink(t, cfg)
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("ping through the proxy: %v", err)
	}
	o := newOutcomes()
	first := event("order", "agg-0", 0)
	o.publish(s, first)
	flush(t, s, 10*time.Second)

	proxy.Down()
	pingCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := s.Ping(pingCtx)
	cancel()
	if err == nil {
		t.Fatal("ping succeeded while sqs was unreachable")
	}
	evs := []*outbox.Event{first}
	for i := 1; i <= 60; i++ {
		e := event("order", fmt.Sprint("agg-", i%4), i)
		evs = append(evs, e)
		o.publish(s, e)
	}
	flushCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err = s.Flush(flushCtx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || o.count() != 1 {
		t.Fatalf("flush while sqs is unreachable: %v with %d outcomes, want a deadline error and none new", err, o.count()-1)
	}
	proxy.Up()
	flush(t, s, 30*time.Second)
	for _, e := range evs {
		if errs := o.of(e.ID); len(errs) != 1 || errs[0] != nil {
			t.Fatalf("event %s: %v", e.ID, errs)
		}
	}
	checkGroupOrder(t, srv, "orders.fifo", evs)

	proxy.Down()
	stuck := event("order", "agg-0", 99)
	o.publish(s, stuck)
	s.Close()
	if errs := o.of(stuck.ID); len(errs) != 1 || !errors.Is(errs[0], sqs.ErrClosed) || sink.IsEventError(errs[0]) {
		t.Fatalf("event in flight at Close: %v, want ErrClosed, not an event error", errs)
	}
	late := event("order", "agg-0", 100)
	o.publish(s, late)
	if !waitFor(5*time.Second, func() bool { return len(o.of(late.ID)) == 1 }) || !errors.Is(o.of(late.ID)[0], sqs.ErrClosed) {
		t.Fatalf("event published after Close: %v, want ErrClosed", o.of(late.ID))
	}
}

// A standard queue keeps no order, so the sink batches its events freely: one
// aggregate's events share requests of up to 10 entries.
func TestStandardQueueBatchesFreely(t *testing.T) {
	t.Parallel()
	srv := sqsserver.Start(t, sqsserver.Options{})
	srv.CreateQueue("orders", 0)
	cfg := config(srv, "orders")
	cfg.Linger = 200 * time.Millisecond // all 25 are queued before the first request is due
	s := newSink(t, cfg)
	o := newOutcomes()
	for i := range 25 {
		o.publish(s, event("order", "one", i))
	}
	flush(t, s, 10*time.Second)
	var sizes []int
	for _, r := range srv.Requests() {
		sizes = append(sizes, len(r.Entries))
	}
	if !slices.Equal(sizes, []int{10, 10, 5}) || srv.Count("orders") != 25 {
		t.Fatalf("requests of %v entries, %d stored; want 10, 10, 5 and 25", sizes, srv.Count("orders"))
	}
}

// Ping looks up a literal template's queue, and says what to do when it is missing.
func TestPing(t *testing.T) {
	t.Parallel()
	srv := sqsserver.Start(t, sqsserver.Options{})
	srv.CreateQueue("present.fifo", 0)
	if err := newSink(t, config(srv, "present.fifo")).Ping(context.Background()); err != nil {
		t.Errorf("ping of an existing queue: %v", err)
	}
	err := newSink(t, config(srv, "absent.fifo")).Ping(context.Background())
	if err == nil || !strings.Contains(err.Error(), "create it") {
		t.Errorf("ping of a missing queue: %v, want an error saying to create it", err)
	}
}
