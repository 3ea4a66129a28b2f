package relay_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
)

// A clean run delivers every committed event exactly once, with the documented
// record format, in commit order per aggregate; rolled-back transactions, other
// tables, updates and deletes never show up.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, "CREATE TABLE other (id serial PRIMARY KEY, v text)"); err != nil {
		t.Fatal(err)
	}
	start(t, dbURL, broker, "e2e")
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)

	aggs := aggregates("agg", 37)
	var written []outbox.Event
	rolledBack := map[string]bool{}
	sizes := []int{1, 5, 50, 1, 200, 3, 17, 1, 120, 8}
	for i := 0; i < 30; i++ {
		written = append(written, testenv.WriteTx(t, conn, aggs[i%len(aggs):], "order.updated", sizes[i%len(sizes)], false)...)
		if i%10 == 3 {
			for _, ev := range testenv.WriteTx(t, conn, aggs, "order.cancelled", 4, true) {
				rolledBack[ev.ID] = true
			}
		}
		if _, err := conn.Exec(ctx, "INSERT INTO other (v) VALUES ('not an event')"); err != nil {
			t.Fatal(err)
		}
	}
	// Another aggregate type goes to its own topic.
	customer := outbox.Event{AggregateType: "customer", AggregateID: "c-1", EventType: "customer.created", Payload: []byte(`{"name": "Ada"}`)}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Write(ctx, tx, &customer); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	written = append(written, customer)

	if !consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("delivered %d distinct of %d events", consumer.Distinct(), len(written))
	}
	byID := map[string]outbox.Event{}
	for _, ev := range written {
		byID[ev.ID] = ev
	}

	// Updates, deletes and other tables must not publish anything: after them, a
	// marker event is the only new record.
	if _, err := conn.Exec(ctx, "UPDATE outbox_events SET processed_at = now() WHERE aggregate_type = 'order'"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "DELETE FROM outbox_events WHERE aggregate_id = $1", aggs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "UPDATE other SET v = 'changed'"); err != nil {
		t.Fatal(err)
	}
	marker := testenv.WriteTx(t, conn, []string{"marker"}, "marker", 1, false)[0]
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(marker.ID) > 0 }) {
		t.Fatal("marker event not delivered")
	}
	if got, want := len(consumer.Records), len(written)+1; got != want {
		t.Fatalf("consumed %d records, want %d (each event once, plus the marker)", got, want)
	}

	lastSeq := map[string]int{} // per aggregate: position in commit order of the last record seen
	seq := map[string]int{}
	for i, ev := range written {
		seq[ev.ID] = i
	}
	for _, rec := range consumer.Records {
		id := testenv.Header(rec, "id")
		if id == marker.ID {
			continue
		}
		if rolledBack[id] {
			t.Fatalf("rolled-back event %s was published", id)
		}
		ev, ok := byID[id]
		if !ok {
			t.Fatalf("unknown event id %q", id)
		}
		if want := "outbox.event." + ev.AggregateType; rec.Topic != want {
			t.Errorf("event %s: topic %q, want %q", id, rec.Topic, want)
		}
		if string(rec.Key) != ev.AggregateID {
			t.Errorf("event %s: key %q, want %q", id, rec.Key, ev.AggregateID)
		}
		var gotPayload, wantPayload any
		if err := json.Unmarshal(rec.Value, &gotPayload); err != nil {
			t.Fatalf("event %s: value is not JSON: %v", id, err)
		}
		_ = json.Unmarshal(ev.Payload, &wantPayload)
		if !reflect.DeepEqual(gotPayload, wantPayload) {
			t.Errorf("event %s: value %s, want %s", id, rec.Value, ev.Payload)
		}
		for key, want := range map[string]string{"event_type": ev.EventType, "aggregate_type": ev.AggregateType, "aggregate_id": ev.AggregateID} {
			if got := testenv.Header(rec, key); got != want {
				t.Errorf("event %s: header %s = %q, want %q", id, key, got, want)
			}
		}
		createdAt, err := time.Parse(time.RFC3339Nano, testenv.Header(rec, "created_at"))
		if err != nil || !createdAt.Equal(ev.CreatedAt) {
			t.Errorf("event %s: header created_at %q (%v), want %s", id, testenv.Header(rec, "created_at"), err, ev.CreatedAt)
		}
		// Records of one aggregate share a partition and are consumed in offset order,
		// so their order here is the order Kafka holds them in.
		if prev, ok := lastSeq[ev.AggregateID]; ok && seq[id] < prev {
			t.Errorf("aggregate %s: event %s (commit position %d) after position %d", ev.AggregateID, id, seq[id], prev)
		}
		lastSeq[ev.AggregateID] = seq[id]
	}
}

// Rows committed before the slot existed are published by the catch-up pass, rows
// committed while it runs by the stream, and rows committed while the relay is down
// when it starts again: each exactly once across clean stops.
func TestCatchUpAndDowntime(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	writer := testenv.Connect(t, dbURL)
	aggs := aggregates("cu", 20)

	var written []outbox.Event
	for i := 0; i < 10; i++ {
		written = append(written, testenv.WriteTx(t, conn, aggs, "before.slot", 30, false)...)
	}
	// Already processed rows (say, by a poller used before walrelay) are not pending.
	if _, err := conn.Exec(context.Background(), "UPDATE outbox_events SET processed_at = now() WHERE id = $1", written[0].ID); err != nil {
		t.Fatal(err)
	}
	written = written[1:]

	// A writer keeps committing while the slot is created and the catch-up runs.
	// OnStream is told when each session streams, the pass over.
	streams := make(chan struct{}, 2)
	onStream := func(c *config) { c.OnStream = func() { streams <- struct{}{} } }
	during := make(chan []outbox.Event)
	rn := start(t, dbURL, broker, "catchup", onStream)
	go func() {
		var evs []outbox.Event
		for i := 0; i < 20; i++ {
			evs = append(evs, testenv.WriteTx(t, writer, aggs, "during.catchup", 5, false)...)
		}
		during <- evs
	}()
	written = append(written, <-during...)
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	if !consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("delivered %d distinct of %d events", consumer.Distinct(), len(written))
	}
	if !rn.waitLog(10*time.Second, "catch-up pass done") {
		t.Fatal("no catch-up log line")
	}
	waitStream := func(session string) {
		select {
		case <-streams:
		case <-time.After(time.Minute):
			t.Fatalf("%s: OnStream was not called", session)
		}
	}
	waitStream("first start")
	rn.stop()

	for i := 0; i < 5; i++ {
		written = append(written, testenv.WriteTx(t, conn, aggs, "while.down", 40, false)...)
	}
	start(t, dbURL, broker, "catchup", onStream)
	waitStream("after restart")
	if !consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("after restart: delivered %d distinct of %d events", consumer.Distinct(), len(written))
	}
	marker := testenv.WriteTx(t, conn, []string{"marker"}, "marker", 1, false)[0]
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(marker.ID) > 0 }) {
		t.Fatal("marker not delivered")
	}
	for _, ev := range written {
		if n := consumer.Count(ev.ID); n != 1 {
			t.Errorf("event %s (%s) delivered %d times, want 1", ev.ID, ev.EventType, n)
		}
	}
	if got, want := len(consumer.Records), len(written)+1; got != want {
		t.Errorf("consumed %d records, want %d", got, want)
	}
}

// While the broker refuses every write, the slot's confirmed LSN stays behind the
// first unacknowledged transaction, and the relay keeps its replication connection
// alive well past wal_sender_timeout, even with its in-flight window full. When the broker recovers, everything drains.
//
// A cluster of its own: firstEnd is the server's WAL position, which other tests'
// writes on a shared cluster would move past the end of the first stuck transaction,
// so a confirmation beyond that transaction could pass unnoticed.
func TestConfirmWaitsForBroker(t *testing.T) {
	t.Parallel()
	const senderTimeout = 1500 * time.Millisecond
	const window = 30
	_, dbURL := ownCluster(t, "", nil)
	broker := testenv.Kafka(t)
	conn := testenv.Connect(t, dbURL)
	reg := prometheus.NewRegistry()
	// A window smaller than the stuck events: reading pauses, status updates must not.
	start(t, testenv.WithParams(dbURL, map[string]string{"wal_sender_timeout": "1500ms"}), broker, "confirm",
		func(c *config) { c.MaxInFlightEvents, c.Registry = window, reg })
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	aggs := aggregates("cf", 10)

	warm := testenv.WriteTx(t, conn, aggs, "warm", 10, false)
	if !consumer.WaitDistinct(time.Minute, len(warm)) {
		t.Fatal("warm-up events not delivered")
	}
	pid := walsenderPID(t, conn, "confirm")

	fault := broker.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotEnoughReplicas, Count: -1})
	written := testenv.WriteTx(t, conn, aggs, "stuck", 20, false)
	firstEnd := testenv.CurrentLSN(t, conn) // at or past the end of the first unacked transaction
	for i := 0; i < 4; i++ {
		written = append(written, testenv.WriteTx(t, conn, aggs, "stuck", 20, false)...)
	}
	if err := fault.Wait(context.Background(), 1); err != nil {
		t.Fatalf("broker never refused a write: %v", err)
	}

	// Watch for three sender timeouts: the walsender must stay the same process and
	// the confirmed LSN must not reach past the first unacked transaction.
	until := time.Now().Add(3 * senderTimeout)
	for time.Now().Before(until) {
		if lsn := testenv.SlotLSN(t, conn, "confirm"); lsn >= firstEnd {
			t.Fatalf("confirmed_flush_lsn %s passed unacked transaction ending at or before %s", lsn, firstEnd)
		}
		if p := walsenderPID(t, conn, "confirm"); p != pid {
			t.Fatalf("walsender changed from pid %d to %d: the connection was not kept alive", pid, p)
		}
		if n := gaugeValue(t, reg, "walrelay_inflight_events"); n > window {
			t.Fatalf("walrelay_inflight_events %v, over MaxInFlightEvents %d", n, window)
		}
		time.Sleep(100 * time.Millisecond) // sampling a state over time is the point here
	}
	if n := gaugeValue(t, reg, "walrelay_inflight_events"); n != window {
		t.Errorf("walrelay_inflight_events %v with 100 events stuck, want the window full at %d", n, window)
	}
	if n := consumer.Distinct(); n != len(warm) {
		t.Fatalf("%d events delivered while the broker refused writes", n-len(warm))
	}

	fault.Remove()
	if !consumer.WaitDistinct(time.Minute, len(warm)+len(written)) {
		t.Fatalf("after recovery: %d of %d delivered", consumer.Distinct(), len(warm)+len(written))
	}
	lastEnd := testenv.CurrentLSN(t, conn)
	deadline := time.Now().Add(30 * time.Second)
	for testenv.SlotLSN(t, conn, "confirm") < firstEnd {
		if time.Now().After(deadline) {
			t.Fatalf("confirmed LSN did not advance after the broker recovered (at %s, want >= %s, wal at %s)",
				testenv.SlotLSN(t, conn, "confirm"), firstEnd, lastEnd)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition with a deadline
	}
}

func walsenderPID(t *testing.T, conn *pgx.Conn, slot string) int {
	t.Helper()
	var pid *int
	if err := conn.QueryRow(context.Background(), "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&pid); err != nil {
		t.Fatalf("read slot: %v", err)
	}
	if pid == nil {
		t.Fatalf("slot %s is not active", slot)
	}
	return *pid
}
