package relay_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/relay"
)

// emitTx emits n table-less events in one transaction and commits it (or rolls it
// back); it returns them with the WAL insert position after the commit.
func emitTx(t testing.TB, conn *pgx.Conn, aggs []string, eventType string, n int, rollback bool) ([]outbox.Event, pglogrepl.LSN) {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	events := make([]outbox.Event, 0, n)
	for i := range n {
		agg := aggs[i%len(aggs)]
		ev := outbox.Event{AggregateType: "order", AggregateID: agg, EventType: eventType,
			Payload: fmt.Appendf(nil, `{"aggregate": %q,   "n": %d}`, agg, i)}
		if err := outbox.Emit(ctx, tx, &ev); err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	if rollback {
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		return events, 0
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var lsn pglogrepl.LSN
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	return events, lsn
}

// startStreaming starts a relay and waits until it streams: a message committed
// before its slot existed is in no row for the catch-up pass to find.
func startStreaming(t *testing.T, dbURL string, broker *kfake.Cluster, slot string, tweak ...func(*config)) *running {
	t.Helper()
	rn := start(t, dbURL, broker, slot, tweak...)
	if !rn.waitLog(time.Minute, "msg=streaming") {
		t.Fatal("the relay did not start streaming")
	}
	return rn
}

// recordOf is the consumed record of event id.
func recordOf(c *testenv.Consumer, id string) *kgo.Record {
	for _, r := range c.Records {
		if testenv.Header(r, "id") == id {
			return r
		}
	}
	return nil
}

// An event emitted in a committed transaction is published once, with its id,
// topic, key and the payload byte for byte; one emitted in a rolled-back
// transaction never is; neither leaves a row; the slot confirms past them.
func TestEmitPublishesOnce(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	startStreaming(t, dbURL, broker, "emit_once")
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	ctx := context.Background()

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	full := outbox.Event{AggregateType: "order", AggregateID: "o-1", EventType: "order.created",
		Payload:   []byte("{\"total\":   42.50, \"z\": 1, \"a\": 2}\n"), // jsonb would reorder and trim this
		CreatedAt: time.Date(2026, 12, 1, 9, 30, 0, 123456000, time.UTC),
		Headers:   []outbox.Header{{Key: "tenant", Value: "t-7"}, {Key: "traceparent", Value: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}
	if err := outbox.Emit(ctx, tx, &full); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	rolledBack, _ := emitTx(t, conn, []string{"rb"}, "rolled.back", 5, true)
	committed, end := emitTx(t, conn, aggregates("em", 7), "committed", 50, false)

	if !consumer.WaitDistinct(time.Minute, 1+len(committed)) {
		t.Fatalf("delivered %d of %d", consumer.Distinct(), 1+len(committed))
	}
	testenv.WaitFor(t, time.Minute, "the slot to confirm past the events", func() bool {
		return testenv.SlotLSN(t, conn, "emit_once") >= end
	})
	for _, ev := range append(committed, full) {
		if n := consumer.Count(ev.ID); n != 1 {
			t.Errorf("event %s delivered %d times, want once", ev.ID, n)
		}
	}
	for _, ev := range rolledBack {
		if n := consumer.Count(ev.ID); n != 0 {
			t.Errorf("rolled-back event %s delivered %d times", ev.ID, n)
		}
	}
	r := recordOf(consumer, full.ID)
	if r.Topic != "outbox.event.order" || string(r.Key) != "o-1" || !bytes.Equal(r.Value, full.Payload) {
		t.Errorf("record topic %q key %q value %q; want outbox.event.order, o-1, %q", r.Topic, r.Key, r.Value, full.Payload)
	}
	for key, want := range map[string]string{"event_type": full.EventType, "aggregate_type": full.AggregateType,
		"aggregate_id": full.AggregateID, "created_at": full.CreatedAt.Format(time.RFC3339Nano),
		"tenant": "t-7", "traceparent": full.Headers[1].Value} {
		if got := testenv.Header(r, key); got != want {
			t.Errorf("header %s = %q, want %q", key, got, want)
		}
	}
	var rows int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox_events").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Errorf("%d outbox rows after emitting only messages, want 0", rows)
	}
}

// Rows and messages of one transaction reach the broker in the transaction's order:
// one aggregate, one partition, and the order is the order they were written.
func TestEmitKeepsOrderWithRows(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	startStreaming(t, dbURL, broker, "emit_order")
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	ctx := context.Background()

	var want []string
	for txn := range 5 {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			ev := outbox.Event{AggregateType: "order", AggregateID: "mixed", EventType: "step",
				Payload: fmt.Appendf(nil, `{"txn": %d, "i": %d}`, txn, i)}
			if (i+txn)%3 == 0 {
				err = outbox.Write(ctx, tx, &ev)
			} else {
				err = outbox.Emit(ctx, tx, &ev)
			}
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, ev.ID)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !consumer.WaitDistinct(time.Minute, len(want)) {
		t.Fatalf("delivered %d of %d", consumer.Distinct(), len(want))
	}
	var got []string
	for _, r := range consumer.Records {
		got = append(got, testenv.Header(r, "id"))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("delivery order differs from the order written:\n got %v\nwant %v", got, want)
	}
}

// An emitted event the broker refuses for what it is becomes a row of the outbox
// table (attempts 1, retry_after, last_error) before its transaction is confirmed,
// and the poller publishes it from there; the events around it flow on.
func TestEmitPoisonEventGoesToThePoller(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	ctx := context.Background()
	// The first produce to the "flaky" aggregate type's topic is refused as an
	// invalid record, an error about the event; the poller's retry is accepted.
	refuse := broker.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "outbox.event.flaky", Err: kerr.InvalidRecord})
	// The table places a column as header x-tenant: the row the refused event gets
	// keeps that header there, and the poller publishes it again.
	if _, err := conn.Exec(ctx, "ALTER TABLE outbox_events ADD COLUMN tenant text"); err != nil {
		t.Fatal(err)
	}
	startStreaming(t, dbURL, broker, "emit_poison", fastRetries, func(c *config) {
		c.Columns.Headers = []outbox.HeaderColumn{{Column: "tenant", Header: "x-tenant"}}
	})
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	flaky := outbox.Event{AggregateType: "flaky", AggregateID: "f", EventType: "once", Payload: []byte(`{"n": 1}`),
		Headers: []outbox.Header{{Key: "traceparent", Value: "00-1-2-01"}, {Key: "x-tenant", Value: "acme"}}}
	if err := outbox.Emit(ctx, tx, &flaky); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	others, end := emitTx(t, conn, aggregates("ep", 5), "fine", 20, false)
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(flaky.ID) > 0 && consumer.Distinct() >= 1+len(others) }) {
		t.Fatalf("delivered %d of %d events (the flaky one %d times)", consumer.Distinct(), 1+len(others), consumer.Count(flaky.ID))
	}
	if refuse.Hits() != 1 {
		t.Fatalf("the broker refused %d produce requests, want 1: the first publish did not fail", refuse.Hits())
	}
	testenv.WaitFor(t, time.Minute, "the slot to confirm past the events", func() bool {
		return testenv.SlotLSN(t, conn, "emit_poison") >= end
	})
	var attempts int
	var lastError string
	var processed *time.Time
	testenv.WaitFor(t, 30*time.Second, "the poller to mark the handed-over event", func() bool {
		err := conn.QueryRow(ctx, "SELECT attempts, last_error, processed_at FROM outbox_events WHERE id = $1", flaky.ID).
			Scan(&attempts, &lastError, &processed)
		if err != nil && err != pgx.ErrNoRows {
			t.Fatal(err)
		}
		return processed != nil
	})
	if attempts != 1 || !strings.Contains(lastError, "INVALID_RECORD") {
		t.Errorf("handed-over row: attempts %d (want 1), last_error %q (want INVALID_RECORD)", attempts, lastError)
	}
	if n := consumer.Count(flaky.ID); n != 1 {
		t.Errorf("the refused event was delivered %d times, want once (by the poller)", n)
	}
	for _, rec := range consumer.Records {
		if testenv.Header(rec, "id") == flaky.ID {
			if got := testenv.Header(rec, "x-tenant"); got != "acme" {
				t.Errorf("the poller published the refused event with header x-tenant %q, want acme (kept in its row)", got)
			}
		}
	}
	var rows int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox_events").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Errorf("%d outbox rows, want 1: only the refused event gets one", rows)
	}
	for _, ev := range others {
		if n := consumer.Count(ev.ID); n != 1 {
			t.Errorf("event %s delivered %d times, want once", ev.ID, n)
		}
	}
}

// A message with the events' prefix whose content is not an event becomes a dead
// letter row; messages with other prefixes, and non-transactional ones, are not
// events and are left alone.
func TestMalformedMessageIsDeadLettered(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	rn := startStreaming(t, dbURL, broker, "emit_bad")
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	ctx := context.Background()

	valid := outbox.MarshalMessage(&outbox.Event{ID: "6f1c7c1e-3c39-4d0e-8a43-0d7f3c1b2a10", AggregateType: "order",
		AggregateID: "x", EventType: "outside", Payload: []byte(`{}`), CreatedAt: time.Now()}, "")
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"SELECT pg_logical_emit_message(true, $1, $2::bytea)", []any{outbox.DefaultMessagePrefix, []byte("not an event")}},
		{"SELECT pg_logical_emit_message(true, 'another.app', $1::bytea)", []any{valid}},
		{"SELECT pg_logical_emit_message(false, $1, $2::bytea)", []any{outbox.DefaultMessagePrefix, valid}},
	} {
		if _, err := conn.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatal(err)
		}
	}
	after, end := emitTx(t, conn, []string{"after"}, "after", 3, false)
	if !consumer.WaitDistinct(time.Minute, len(after)) {
		t.Fatalf("delivered %d of %d", consumer.Distinct(), len(after))
	}
	testenv.WaitFor(t, time.Minute, "the slot to confirm past the messages", func() bool {
		return testenv.SlotLSN(t, conn, "emit_bad") >= end
	})
	var n int
	var lastError, payload string
	if err := conn.QueryRow(ctx, `SELECT count(*), min(last_error), min(payload::text) FROM outbox_events_dead_letters
		WHERE aggregate_type = 'walrelay.message' AND event_type = 'malformed'`).Scan(&n, &lastError, &payload); err != nil {
		t.Fatal(err)
	}
	if n != 1 || !strings.Contains(lastError, "marker") || !strings.Contains(payload, "bm90IGFuIGV2ZW50") {
		t.Errorf("%d dead letters (want 1), last_error %q, payload %s (want the content in base64)", n, lastError, payload)
	}
	var rows int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox_events").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Errorf("%d outbox rows, want 1 (the dead letter)", rows)
	}
	if d := consumer.Distinct(); d != len(after) {
		t.Errorf("%d distinct events delivered, want %d: only the valid transactional ones", d, len(after))
	}
	if !rn.waitLog(10*time.Second, "non-transactional logical message") {
		t.Error("the non-transactional message was not logged")
	}
}

// A relay stopped while events are being emitted, and started again, loses none of
// them and repeats none whose transaction it had confirmed.
func TestEmitRestartLosesNothing(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	writer := testenv.Connect(t, dbURL)
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	rn := startStreaming(t, dbURL, broker, "emit_restart")

	type written struct {
		ev  outbox.Event
		lsn pglogrepl.LSN // after its commit
	}
	var mu sync.Mutex
	var all []written
	const txs, perTx = 60, 10
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range txs {
			evs, lsn := emitTx(t, writer, aggregates("rs", 9), "restart", perTx, false)
			mu.Lock()
			for _, ev := range evs {
				all = append(all, written{ev, lsn})
			}
			mu.Unlock()
		}
	}()
	var confirmed []pglogrepl.LSN
	for _, reached := range []int{100, 250, 400} {
		if !consumer.WaitDistinct(2*time.Minute, reached) {
			t.Fatalf("delivered %d, want %d before the next stop", consumer.Distinct(), reached)
		}
		rn.stop()
		confirmed = append(confirmed, testenv.SlotLSN(t, conn, "emit_restart"))
		rn = startStreaming(t, dbURL, broker, "emit_restart")
	}
	<-done
	mu.Lock()
	defer mu.Unlock()
	if !consumer.WaitDistinct(2*time.Minute, len(all)) {
		t.Fatalf("delivered %d of %d emitted events", consumer.Distinct(), len(all))
	}
	repeatedConfirmed, repeated := 0, 0
	for _, w := range all {
		n := consumer.Count(w.ev.ID)
		if n > 1 {
			repeated++
			if w.lsn <= confirmed[0] {
				repeatedConfirmed++
			}
		}
	}
	t.Logf("%d events emitted, %d delivered more than once (across 3 stops)", len(all), repeated)
	if repeatedConfirmed > 0 {
		t.Errorf("%d events confirmed before the first stop were delivered again", repeatedConfirmed)
	}
}

// With exactly-once delivery, table-less events are produced in the stream's Kafka
// transactions: read_committed consumers see each healthy one once, one that
// poisons a Kafka transaction gets a row for the poller (and ends a dead letter,
// being too large for any producer), and a malformed message a dead-letter row.
func TestExactlyOnceEmittedEvents(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	broker := testenv.Kafka(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "4000000"}))
	conn := testenv.Connect(t, dbURL)
	startStreaming(t, dbURL, broker, "eo_emit", fastRetries, func(c *config) { c.Delivery = relay.ExactlyOnce })
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ctx := context.Background()

	healthy, _ := emitTx(t, conn, aggregates("eoe", 10), "before", 100, false)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	poison := outbox.Event{AggregateType: "order", AggregateID: "poison", EventType: "huge",
		Payload: []byte(`{"blob": "` + strings.Repeat("x", 1_500_000) + `"}`)}
	if err := outbox.Emit(ctx, tx, &poison); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT pg_logical_emit_message(true, $1, 'garbage'::bytea)", outbox.DefaultMessagePrefix); err != nil {
		t.Fatal(err)
	}
	same := outbox.Event{AggregateType: "order", AggregateID: "same-tx", EventType: "healthy", Payload: []byte(`{}`)}
	if err := outbox.Emit(ctx, tx, &same); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	after, _ := emitTx(t, conn, aggregates("eoe", 10), "after", 100, false)
	healthy = append(append(healthy, same), after...)

	if !consumer.WaitDistinct(time.Minute, len(healthy)) {
		t.Fatalf("healthy events: %d of %d", consumer.Distinct(), len(healthy))
	}
	testenv.WaitFor(t, time.Minute, "the poison event and the malformed message in outbox_events_dead_letters", func() bool {
		var poisoned, malformed int
		err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE id = $1), count(*) FILTER (WHERE event_type = 'malformed')
			FROM outbox_events_dead_letters`, poison.ID).Scan(&poisoned, &malformed)
		return err == nil && poisoned == 1 && malformed == 1
	})
	marker, _ := emitTx(t, conn, []string{"m"}, "marker", 1, false)
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(marker[0].ID) > 0 }) {
		t.Fatal("marker not delivered")
	}
	for _, ev := range healthy {
		if n := consumer.Count(ev.ID); n != 1 {
			t.Errorf("healthy event %s seen %d times", ev.ID, n)
		}
	}
	if n := consumer.Count(poison.ID); n != 0 {
		t.Errorf("the poison event was seen %d times", n)
	}
}

// A refused emitted event whose payload the outbox table cannot store (not JSON, for
// a jsonb column) becomes a dead letter at once, the payload kept in base64, instead
// of a row the poller could not be given.
func TestEmitRefusedPayloadTheTableCannotHoldIsDeadLettered(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	ctx := context.Background()
	refuse := broker.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "outbox.event.binary", Err: kerr.InvalidRecord})
	startStreaming(t, dbURL, broker, "emit_binary", fastRetries)
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raw := outbox.Event{AggregateType: "binary", AggregateID: "b", EventType: "blob", Payload: []byte{0x00, 0xff, 'x'}}
	if err := outbox.Emit(ctx, tx, &raw); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	after, end := emitTx(t, conn, []string{"after"}, "after", 3, false)
	if !consumer.WaitDistinct(time.Minute, len(after)) {
		t.Fatalf("delivered %d of %d", consumer.Distinct(), len(after))
	}
	testenv.WaitFor(t, time.Minute, "the slot to confirm past the events", func() bool {
		return testenv.SlotLSN(t, conn, "emit_binary") >= end
	})
	if refuse.Hits() != 1 {
		t.Fatalf("the broker refused %d produce requests, want 1", refuse.Hits())
	}
	var payload, lastError string
	if err := conn.QueryRow(ctx, "SELECT payload->>'payload_base64', last_error FROM outbox_events_dead_letters WHERE id = $1",
		raw.ID).Scan(&payload, &lastError); err != nil {
		t.Fatalf("the refused event is not a dead letter: %v", err)
	}
	if payload != "AP94" || !strings.Contains(lastError, "INVALID_RECORD") || !strings.Contains(lastError, "cannot be stored") {
		t.Errorf("dead letter payload_base64 %q (want AP94), last_error %q", payload, lastError)
	}
	if n := consumer.Count(raw.ID); n != 0 {
		t.Errorf("the refused event was delivered %d times", n)
	}
}

// With two outbox tables, an emitted event takes the topic template of the table its
// Emitter names, and when refused it is handed to that table (a Debezium-shaped one,
// without created_at) and published by its poller.
func TestEmitToTheSecondTable(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	ctx := context.Background()
	execSQL(t, conn, `CREATE SCHEMA tenant_b`)
	debeziumTable(t, conn, "tenant_b.outbox")
	refuse := broker.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "tenant_b.flaky", Err: kerr.InvalidRecord})
	startStreaming(t, dbURL, broker, "emit_two", fastRetries, func(c *config) {
		c.Publication = "emit_two"
		c.Tables = []relay.TableConfig{
			{Table: "outbox_events", Columns: outbox.DefaultColumns(), TopicTemplate: "tenant_a.{aggregate_type}"},
			{Table: "tenant_b.outbox", Columns: debeziumColumns, TopicTemplate: "tenant_b.{aggregate_type}"},
		}
	})
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `tenant_[ab]\..*`)

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a := outbox.Event{AggregateType: "order", AggregateID: "a", EventType: "placed", Payload: []byte(`{}`)}
	b := outbox.Event{AggregateType: "invoice", AggregateID: "b", EventType: "sent", Payload: []byte(`{}`)}
	flaky := outbox.Event{AggregateType: "flaky", AggregateID: "f", EventType: "once", Payload: []byte(`{"n": 1}`)}
	second := outbox.Emitter{Table: "tenant_b.outbox"}
	for _, err := range []error{outbox.Emit(ctx, tx, &a), second.Emit(ctx, tx, &b), second.Emit(ctx, tx, &flaky)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if !consumer.WaitFor(time.Minute, func() bool {
		return consumer.Count(a.ID) > 0 && consumer.Count(b.ID) > 0 && consumer.Count(flaky.ID) > 0
	}) {
		t.Fatalf("delivered: a %d, b %d, flaky %d times", consumer.Count(a.ID), consumer.Count(b.ID), consumer.Count(flaky.ID))
	}
	if refuse.Hits() != 1 {
		t.Fatalf("the broker refused %d produce requests, want 1", refuse.Hits())
	}
	for id, topic := range map[string]string{a.ID: "tenant_a.order", b.ID: "tenant_b.invoice", flaky.ID: "tenant_b.flaky"} {
		if r := recordOf(consumer, id); r.Topic != topic {
			t.Errorf("event %s on topic %s, want %s", id, r.Topic, topic)
		}
	}
	var inA, inB int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM outbox_events),
		(SELECT count(*) FROM tenant_b.outbox WHERE id = $1 AND attempts = 1)`, flaky.ID).Scan(&inA, &inB); err != nil {
		t.Fatal(err)
	}
	if inA != 0 || inB != 1 {
		t.Errorf("rows: %d in outbox_events (want 0), refused event in tenant_b.outbox %d (want 1)", inA, inB)
	}
}

// A slot whose catch-up pass was never recorded as done (the relay stopped between
// the pass and its record) is kept: the table-less events committed past its
// confirmed position are in no row a pass could find, and only its stream still
// carries them. The rows committed before it are published too.
func TestEmitAfterUnrecordedCatchupPass(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	before := testenv.WriteTx(t, conn, []string{"b"}, "before.slot", 2, false)
	startStreaming(t, dbURL, broker, "emit_unrecorded").stop()
	if !consumer.WaitDistinct(time.Minute, len(before)) {
		t.Fatalf("delivered %d of the %d rows written before the slot", consumer.Distinct(), len(before))
	}
	// What a stop between the pass and its record leaves.
	if _, err := conn.Exec(context.Background(),
		"UPDATE walrelay_slots SET catchup_done_at = NULL WHERE slot_name = 'emit_unrecorded'"); err != nil {
		t.Fatal(err)
	}
	emitted, _ := emitTx(t, conn, []string{"e"}, "after.slot", 3, false)
	startStreaming(t, dbURL, broker, "emit_unrecorded")
	if !consumer.WaitDistinct(time.Minute, len(before)+len(emitted)) {
		t.Errorf("delivered %d of %d events", consumer.Distinct(), len(before)+len(emitted))
	}
	for _, ev := range emitted {
		if consumer.Count(ev.ID) == 0 {
			t.Errorf("emitted event %s lost", ev.ID)
		}
	}
}
