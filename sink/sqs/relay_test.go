package sqs_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/internal/testenv/sqsserver"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/sink"
)

// startRelay runs a relay streaming dbURL into snk until the test ends, with fast
// poller retries (three attempts) so that a refused event becomes a dead letter soon.
func startRelay(t *testing.T, dbURL, slot string, snk sink.Sink, logs *testenv.LogBuffer) {
	t.Helper()
	testenv.RunRelay(t, dbURL, slot, snk, logs, func(c *relay.Config) {
		c.Retry = poller.Policy{MaxAttempts: 3, BackoffMin: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond}
		c.PollInterval = 50 * time.Millisecond
	})
}

func aggregates(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

// checkQueue asserts that the queue holds every written event exactly once, with
// its attributes and body, in commit order per aggregate (its message group).
func checkQueue(t *testing.T, srv *sqsserver.Server, queue string, written []outbox.Event) {
	t.Helper()
	byID := map[string]outbox.Event{}
	ids := make([]string, len(written))
	for i, e := range written {
		byID[e.ID], ids[i] = e, e.ID
	}
	if err := srv.CheckDelivery(queue, ids); err != nil {
		t.Fatal(err)
	}
	for _, m := range srv.Messages(queue) {
		e := byID[m.Attributes["id"]]
		if m.GroupID != e.AggregateID || m.DedupID != e.ID || m.Attributes["aggregate_id"] != e.AggregateID ||
			m.Attributes["event_type"] != e.EventType || m.Body == "" {
			t.Fatalf("event %s: message %+v does not match it", e.ID, m)
		}
	}
}

// Through the relay, 2,000 events of many aggregates arrive in their FIFO queue once
// each, in commit order per aggregate.
func TestRelayEndToEnd(t *testing.T) {
	t.Parallel()
	srv := sqsserver.Start(t, sqsserver.Options{Latency: time.Millisecond})
	srv.CreateQueue("outbox-order.fifo", 0)
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	snk := newSink(t, config(srv, sqsDefaultTemplate))
	startRelay(t, dbURL, "sqs_e2e", snk, &testenv.LogBuffer{})

	began := time.Now()
	aggs := aggregates("e2e", 97)
	var written []outbox.Event
	sizes := []int{1, 50, 120, 7, 200, 33}
	for i := 0; len(written) < 2000; i++ {
		written = append(written, testenv.WriteTx(t, conn, aggs[i%len(aggs):], "order.updated", sizes[i%len(sizes)], false)...)
	}
	if !waitFor(time.Minute, func() bool { return srv.Count("outbox-order.fifo") >= len(written) }) {
		t.Fatalf("queue holds %d of %d events", srv.Count("outbox-order.fifo"), len(written))
	}
	t.Logf("%d events committed and stored in %s", len(written), time.Since(began).Round(time.Millisecond))
	checkQueue(t, srv, "outbox-order.fifo", written)
	if n := srv.GroupOverlaps(); n != 0 {
		t.Errorf("%d requests carried a group whose earlier request was still being answered", n)
	}
	checkOneMessagePerGroup(t, srv.Requests())
}

const sqsDefaultTemplate = "outbox-{aggregate_type}.fifo"

// SQS unreachable for a few seconds while the application keeps committing: once
// it is back every event is in the queue once, in commit order per aggregate.
func TestRelayOutage(t *testing.T) {
	t.Parallel()
	srv := sqsserver.Start(t, sqsserver.Options{})
	srv.CreateQueue("outbox-order.fifo", 0)
	proxy := testenv.NewProxy(t, srv.Addr)
	dbURL := testenv.MigratedDatabase(t)
	writer := testenv.Connect(t, dbURL)
	logs := &testenv.LogBuffer{}
	cfg := config(srv, sqsDefaultTemplate)
	cfg.Endpoint = "http://" + proxy.Addr()
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	snk := newSink(t, cfg)
	startRelay(t, dbURL, "sqs_outage", snk, logs)

	aggs := aggregates("out", 41)
	const txs, perTx = 80, 25
	written := make(chan []outbox.Event, 1)
	var committed atomic.Int64
	go func() {
		var evs []outbox.Event
		for i := range txs {
			evs = append(evs, testenv.WriteTx(t, writer, aggs[i%len(aggs):], "order.updated", perTx, false)...)
			committed.Store(int64(len(evs)))
			time.Sleep(40 * time.Millisecond) // pacing the load, so it spans the outage
		}
		written <- evs
	}()
	if !waitFor(30*time.Second, func() bool { return srv.Count("outbox-order.fifo") >= 5*perTx }) {
		t.Fatalf("no events delivered before the outage (%d)", srv.Count("outbox-order.fifo"))
	}
	proxy.Down()
	atDown := committed.Load()
	time.Sleep(2500 * time.Millisecond) // the outage itself
	during := srv.Count("outbox-order.fifo")
	if committed.Load() == atDown {
		t.Fatal("the writer committed nothing during the outage")
	}
	proxy.Up()
	evs := <-written
	if !waitFor(time.Minute, func() bool { return srv.Count("outbox-order.fifo") >= len(evs) }) {
		t.Fatalf("queue holds %d of %d events after the outage", srv.Count("outbox-order.fifo"), len(evs))
	}
	// Anything sent twice would be stored by now: the marker comes after it.
	marker := testenv.WriteTx(t, writer, []string{"marker"}, "marker", 1, false)
	if !waitFor(30*time.Second, func() bool { return srv.Count("outbox-order.fifo") >= len(evs)+1 }) {
		t.Fatal("marker not delivered")
	}
	checkQueue(t, srv, "outbox-order.fifo", append(evs, marker...))
	t.Logf("outage: %d of %d events stored when it ended; %d repeats dropped by deduplication",
		during, len(evs), srv.Deduplicated("outbox-order.fifo"))
	if during >= len(evs) || !strings.Contains(logs.String(), "sqs unavailable") {
		t.Errorf("the outage missed the load: %d of %d stored before sqs came back, and the sink saw no failure", during, len(evs))
	}
}

// An event too large for its queue is refused before it is sent, retried by the
// poller and dead-lettered; its aggregate's later events are delivered in order, each
// sent only after the refused event was settled. Everything else flows.
func TestRelayTooLargeIsDeadLettered(t *testing.T) {
	t.Parallel()
	srv := sqsserver.Start(t, sqsserver.Options{})
	srv.CreateQueue("outbox-order.fifo", 64<<10)
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	o := newOutcomes()
	snk := &recording{Sink: newSink(t, config(srv, sqsDefaultTemplate)), o: o}
	startRelay(t, dbURL, "sqs_large", snk, &testenv.LogBuffer{})

	ctx := context.Background()
	var written []outbox.Event
	written = append(written, testenv.WriteTx(t, conn, []string{"big", "other"}, "before", 10, false)...)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	large := outbox.Event{AggregateType: "order", AggregateID: "big", EventType: "huge",
		Payload: []byte(`{"blob": "` + strings.Repeat("x", 100<<10) + `"}`)}
	if err := outbox.Write(ctx, tx, &large); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	later := testenv.WriteTx(t, conn, []string{"big", "other"}, "after", 10, false)
	written = append(written, later...)

	var attempts int
	var lastError string
	if !waitFor(time.Minute, func() bool {
		err := conn.QueryRow(ctx, "SELECT attempts, last_error FROM outbox_events_dead_letters WHERE id = $1", large.ID).Scan(&attempts, &lastError)
		if err != nil && err != pgx.ErrNoRows {
			t.Fatal(err)
		}
		return err == nil
	}) {
		t.Fatal("the too-large event was not dead-lettered")
	}
	if attempts != 3 || !strings.Contains(lastError, "MaximumMessageSize") {
		t.Errorf("dead letter: attempts %d (want 3), last_error %q (want it to name MaximumMessageSize)", attempts, lastError)
	}
	if !waitFor(30*time.Second, func() bool { return srv.Count("outbox-order.fifo") >= len(written) }) {
		t.Fatalf("queue holds %d of %d events", srv.Count("outbox-order.fifo"), len(written))
	}
	checkQueue(t, srv, "outbox-order.fifo", written)
	refusedAt := o.when(large.ID)
	for _, r := range srv.Requests() {
		for _, e := range r.Entries {
			if e.DedupID == large.ID {
				t.Fatal("the too-large event was sent")
			}
			if e.GroupID == "big" && strings.HasPrefix(e.Attributes["event_type"], "after") && r.At.Before(refusedAt) {
				t.Fatalf("event %s of the refused event's aggregate was sent before the refusal was settled", e.DedupID)
			}
		}
	}
}

// recording is a sink that records each outcome's time, first one kept.
type recording struct {
	sink.Sink
	o *outcomes
}

func (r *recording) Publish(e *outbox.Event, done sink.Done) {
	id := e.ID
	r.Sink.Publish(e, sink.DoneFunc(func(err error) {
		r.o.mu.Lock()
		r.o.calls[id] = append(r.o.calls[id], err)
		if _, ok := r.o.at[id]; !ok {
			r.o.at[id] = time.Now()
		}
		r.o.n++
		r.o.mu.Unlock()
		done.Done(err)
	}))
}
