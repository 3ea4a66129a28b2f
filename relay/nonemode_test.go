package relay_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
)

// With --on-publish none the application deletes its rows in the transaction that
// writes them. A poison event is then re-inserted for the poller; that insert goes
// through the publication, and the stream must not publish it again: each attempt
// after the first is the poller's, after its backoff, and counts once.
func TestNoneModeHandOverIsNotStreamedAgain(t *testing.T) {
	t.Parallel()
	const maxAttempts = 4
	dbURL := testenv.MigratedDatabase(t)
	broker := testenv.Kafka(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "4000000"}))
	conn := testenv.Connect(t, dbURL)
	reg := prometheus.NewRegistry()
	rn := start(t, dbURL, broker, "none_handover", fastRetries, func(c *config) {
		c.OnPublish = poller.None
		c.Retry.MaxAttempts = maxAttempts
		c.Registry = reg
	})
	// The broker refuses the poison's records for what they are, as often as they
	// come: a refusal a retry may get past, so every attempt is made. (One too large
	// for the producer would be a dead letter at its first.)
	broker.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "outbox.event.poison", Err: kerr.InvalidRecord, Count: -1})
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	ctx := context.Background()
	// Rows deleted before the slot exists are seen by neither the stream nor the
	// catch-up pass.
	if !rn.waitLog(time.Minute, "msg=streaming") {
		t.Fatal("the relay did not start streaming")
	}

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	healthy := outbox.Event{AggregateType: "order", AggregateID: "h", EventType: "fine", Payload: []byte(`{}`)}
	poison := outbox.Event{AggregateType: "poison", AggregateID: "p", EventType: "huge", Payload: []byte(`{}`)}
	for _, ev := range []*outbox.Event{&healthy, &poison} {
		if err := outbox.Write(ctx, tx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.Exec(ctx, "DELETE FROM outbox_events WHERE id = ANY($1::uuid[])", []string{healthy.ID, poison.ID}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(healthy.ID) > 0 }) {
		t.Fatal("the healthy event of the poison's transaction was not delivered")
	}

	var attempts int
	waitFor(t, time.Minute, "the re-inserted poison event in outbox_events_dead_letters", func() bool {
		err := conn.QueryRow(ctx, "SELECT attempts FROM outbox_events_dead_letters WHERE id = $1", poison.ID).Scan(&attempts)
		if err != nil && err != pgx.ErrNoRows {
			t.Fatal(err)
		}
		return err == nil
	})
	// Everything committed before the marker, the re-insert included, has been
	// through the stream once the marker is delivered.
	marker := testenv.WriteTx(t, conn, []string{"m"}, "marker", 1, false)[0]
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(marker.ID) > 0 }) {
		t.Fatal("marker not delivered")
	}

	if attempts != maxAttempts {
		t.Errorf("dead letter after %d attempts, want %d", attempts, maxAttempts)
	}
	// Who made each attempt: the stream once, then the poller with attempts 2..N.
	var streamed int
	var polled []string
	for line := range strings.Lines(rn.logs.String()) {
		if !strings.Contains(line, "event_id="+poison.ID) {
			continue
		}
		switch {
		case strings.Contains(line, "handing the event to the poller"):
			streamed++
		case strings.Contains(line, "recorded for retry"):
			_, attempt, _ := strings.Cut(line, " attempt=")
			attempt, _, _ = strings.Cut(attempt, " ")
			polled = append(polled, attempt)
		}
	}
	if want := []string{"2", "3", "4"}; streamed != 1 || !slices.Equal(polled, want) {
		t.Errorf("the stream attempted the poison event %d times (want 1) and the poller with attempts %v (want %v)",
			streamed, polled, want)
	}
	if n := failedTotal(t, reg, "huge"); n != maxAttempts {
		t.Errorf("outbox_events_failed_total{event_type=huge} = %v, want %d: one per attempt", n, maxAttempts)
	}
	if consumer.Count(poison.ID) != 0 {
		t.Error("the poison event was delivered")
	}
}

// With --on-publish none walrelay never deletes a row: one the application kept,
// whose first publish failed on its own and whose retry by the poller succeeded,
// stays in the table, marked processed.
func TestNoneModeNeverDeletes(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	ctx := context.Background()
	// The broker refuses the first produce request for the topic of aggregate type
	// "flaky" (the default template: outbox.event.{aggregate_type}) as an invalid
	// record, an error about the event, and accepts the poller's retry.
	refuse := broker.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "outbox.event.flaky", Err: kerr.InvalidRecord})
	start(t, dbURL, broker, "none_keeps", fastRetries, func(c *config) { c.OnPublish = poller.None })
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	flaky := outbox.Event{AggregateType: "flaky", AggregateID: "f", EventType: "once", Payload: []byte(`{"n": 1}`)}
	if err := outbox.Write(ctx, tx, &flaky); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	others := testenv.WriteTx(t, conn, aggregates("nd", 5), "fine", 20, false)
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(flaky.ID) > 0 && consumer.Distinct() >= 1+len(others) }) {
		t.Fatalf("delivered %d of %d events (the flaky one %d times)", consumer.Distinct(), 1+len(others), consumer.Count(flaky.ID))
	}
	if refuse.Hits() != 1 {
		t.Fatalf("the broker refused %d produce requests, want 1: the first publish did not fail", refuse.Hits())
	}

	// The poller's bookkeeping commits just after the ack the consumer saw.
	var rows, marked int
	waitFor(t, 30*time.Second, "the poller's bookkeeping for the retried row", func() bool {
		if err := conn.QueryRow(ctx, "SELECT count(*), count(processed_at) FROM outbox_events WHERE id = $1", flaky.ID).Scan(&rows, &marked); err != nil {
			t.Fatal(err)
		}
		return rows == 0 || marked == 1
	})
	if rows != 1 {
		t.Fatal("walrelay deleted the retried row in --on-publish none mode")
	}
	var attempts int
	var retryAfter *time.Time
	var lastError string
	if err := conn.QueryRow(ctx, "SELECT attempts, retry_after, last_error FROM outbox_events WHERE id = $1", flaky.ID).
		Scan(&attempts, &retryAfter, &lastError); err != nil {
		t.Fatal(err)
	}
	if attempts != 1 || retryAfter != nil || !strings.Contains(lastError, "INVALID_RECORD") {
		t.Errorf("retried row: attempts %d (want 1), retry_after %v (want NULL), last_error %q (want INVALID_RECORD)",
			attempts, retryAfter, lastError)
	}
	// The rows published at the first attempt are left alone.
	var untouched int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM outbox_events WHERE id <> $1
		AND processed_at IS NULL AND attempts = 0 AND retry_after IS NULL`, flaky.ID).Scan(&untouched); err != nil {
		t.Fatal(err)
	}
	if untouched != len(others) {
		t.Errorf("%d of the %d rows published by the stream left untouched", untouched, len(others))
	}
}

// failedTotal reads outbox_events_failed_total for one event type.
func failedTotal(t *testing.T, reg *prometheus.Registry, eventType string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "outbox_events_failed_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "event_type" && l.GetValue() == eventType {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// With --on-publish none, an event whose first publish failed is re-inserted for the
// poller, its row being gone. The poller then publishes it with the headers, the
// partition and the trace context of its placed columns, as the stream would have:
// the re-inserted row carries them. A tombstone (NULL payload) is re-inserted with
// its NULL.
func TestNoneModeHandOverKeepsPlacedColumns(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `ALTER TABLE outbox_events ADD COLUMN tenant text, ADD COLUMN priority int,
		ADD COLUMN part int, ADD COLUMN traceparent text, ALTER COLUMN payload DROP NOT NULL`); err != nil {
		t.Fatal(err)
	}
	// The broker refuses the first produce request of each topic as an invalid record,
	// an error about the event, and accepts the poller's retry.
	var refusals []*kfake.FaultHandle
	for _, topic := range []string{"outbox.event.flaky", "outbox.event.gone"} {
		refusals = append(refusals, broker.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.InvalidRecord}))
	}
	rn := start(t, dbURL, broker, "none_placed", fastRetries, func(c *config) {
		c.OnPublish = poller.None
		// event_type is a core column placed as a header too, as Debezium's
		// type:header:eventType does.
		c.Columns.Headers = []outbox.HeaderColumn{{Column: "tenant", Header: "x-tenant"}, {Column: "priority"},
			{Column: "event_type", Header: "eventType"}}
		c.Columns.Partition = "part"
	})
	if !rn.waitLog(time.Minute, "msg=streaming") {
		t.Fatal("the relay did not start streaming")
	}
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)

	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	type row struct {
		aggType, payload, trace string
		id                      string
	}
	rows := []*row{
		{aggType: "flaky", payload: `{"n": 1}`, trace: "traceparent=" + parent + "\ntracestate=vendor=v1"},
		{aggType: "gone", trace: parent}, // payload NULL: a tombstone
	}
	for _, r := range rows {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var payload *string
		if r.payload != "" {
			payload = &r.payload
		}
		if err := tx.QueryRow(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload,
				tenant, priority, part, traceparent)
			VALUES ($1::text, 'a1', $1::text || '.happened', $2::jsonb, 'acme', 7, 2, $3) RETURNING id::text`,
			r.aggType, payload, r.trace).Scan(&r.id); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "DELETE FROM outbox_events WHERE id = $1", r.id); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(rows[0].id) > 0 && consumer.Count(rows[1].id) > 0 }) {
		t.Fatalf("the poller did not publish both re-inserted events (counts %d and %d)",
			consumer.Count(rows[0].id), consumer.Count(rows[1].id))
	}
	for i, f := range refusals {
		if f.Hits() != 1 {
			t.Fatalf("the broker refused %d produce requests for %s, want 1: the first publish did not fail", f.Hits(), rows[i].aggType)
		}
	}

	for _, r := range rows {
		var tenant, trace *string
		var priority, part *int
		var nullPayload bool
		if err := conn.QueryRow(ctx, `SELECT tenant, priority, part, traceparent, payload IS NULL
			FROM outbox_events WHERE id = $1`, r.id).Scan(&tenant, &priority, &part, &trace, &nullPayload); err != nil {
			t.Fatalf("re-inserted row %s: %v", r.aggType, err)
		}
		if tenant == nil || *tenant != "acme" || priority == nil || *priority != 7 || part == nil || *part != 2 ||
			trace == nil || *trace != r.trace || nullPayload != (r.payload == "") {
			t.Errorf("re-inserted row %s: tenant %v, priority %v, part %v, traceparent %v, NULL payload %v; "+
				"want acme, 7, 2, %q, %v", r.aggType, deref(tenant), deref(priority), deref(part), deref(trace), nullPayload,
				r.trace, r.payload == "")
		}
	}
	for _, rec := range consumer.Records {
		var r *row
		for _, w := range rows {
			if testenv.Header(rec, "id") == w.id {
				r = w
			}
		}
		if r == nil {
			continue
		}
		want := map[string]string{"x-tenant": "acme", "priority": "7", "eventType": r.aggType + ".happened",
			"traceparent": parent, "tracestate": ""}
		if r.aggType == "flaky" {
			want["tracestate"] = "vendor=v1"
		}
		for k, v := range want {
			if got := testenv.Header(rec, k); got != v {
				t.Errorf("%s: header %s = %q, want %q", r.aggType, k, got, v)
			}
		}
		if rec.Partition != 2 {
			t.Errorf("%s: partition %d, want 2 (the part column)", r.aggType, rec.Partition)
		}
		if (rec.Value == nil) != (r.payload == "") {
			t.Errorf("%s: value %q; a tombstone's must be null, another's not", r.aggType, rec.Value)
		}
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
