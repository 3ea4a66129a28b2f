package main_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/testenv"
)

// TestDebeziumRouterPlacement runs the binary on the YAML import-debezium prints for a
// router configured with additional placement, expand.json.payload and a tracing
// span context field, over Debezium's table shape (testdata/debezium_outbox.sql with
// a text payload and the placed columns). Its records are what the router's
// documentation says it publishes for the same rows: topic outbox.event.<aggregatetype>,
// key aggregateid, the value the envelope of the expanded payload and the audit
// column as JsonConverter writes it (a null value for a NULL payload), the id header, each header column under its alias (a NULL one with a null
// value), the partition column's
// partition, and the trace context as traceparent and tracestate, whether the
// catch-up pass (a row older than the slot) or the stream publishes it. A partition
// the topic lacks is an event error: the poller gets the row with the reason. Then
// poll mode publishes the same rows again, and its records equal the stream's.
func TestDebeziumRouterPlacement(t *testing.T) {
	t.Parallel()
	dbURL := testenv.Database(t)
	kafka := testenv.Kafka(t)
	brokers := kafka.ListenAddrs()
	const topic = "outbox.event.order"
	if err := kafka.CreateTopic(topic, 3, nil); err != nil {
		t.Fatal(err)
	}
	table, err := os.ReadFile(filepath.Join("testdata", "debezium_outbox.sql"))
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, dbURL, string(table))
	execSQL(t, dbURL, `ALTER TABLE outbox ALTER COLUMN payload TYPE text, ADD COLUMN tenant_id text, ADD COLUMN region text,
		ADD COLUMN part integer, ADD COLUMN tracingspancontext text, ADD COLUMN audit text`)

	imported := run(t, time.Minute, baseEnv(), "import-debezium", "--allow-differences",
		"--worker", filepath.Join("..", "..", "debezium", "testdata", "router-placement.worker"), filepath.Join("..", "..", "debezium", "testdata", "router-placement.json"))
	if imported.code != 0 {
		t.Fatalf("import-debezium: exit code %d\n%s", imported.code, imported.stderr)
	}
	yaml := imported.stdout
	slot := slotName(t, "")
	env := relayEnv(dbURL, brokers, "WALRELAY_CONFIG="+writeFile(t, "walrelay.yaml", yaml),
		"WALRELAY_SLOT="+slot, "WALRELAY_PUBLICATION="+slot, "WALRELAY_RETRY_BACKOFF_MIN=1h", "WALRELAY_RETRY_BACKOFF_MAX=1h")
	if res := run(t, time.Minute, env, "migrate"); res.code != 0 {
		t.Fatalf("migrate: exit code %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	conn := testenv.Connect(t, dbURL)

	const (
		traceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		document    = `{"id": 1, "lineItems": [{"id": 1, "item": "Debezium in Action", "quantity": 2}], "customerId": 123}`
	)
	rows := []struct {
		aggID, eventType string
		payload          any // nil: NULL
		tenant, region   any
		part             any
		trace            string
	}{
		{"1", "OrderCreated", document, "acme", "eu-west", 2,
			"#Mon Nov 30 10:00:00 UTC 2026\ntraceparent=" + traceParent + "\ntracestate=rojo\\=00f067aa0ba902b7\n"},
		{"2", "OrderDeleted", nil, "acme", nil, nil, traceParent},
		{"3", "OrderCreated", `{"n": 3}`, "globex", "us", 9, ""},
		{"4", "OrderShipped", `"shipped"`, nil, nil, nil, "not a trace context"},
	}
	ids := make([]string, len(rows))
	insert := func(i int) {
		r := rows[i]
		if err := conn.QueryRow(context.Background(), `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload,
				tenant_id, region, part, tracingspancontext) VALUES (gen_random_uuid(), 'order', $1, $2, $3, $4, $5, $6, $7)
				RETURNING id::text`, r.aggID, r.eventType, r.payload, r.tenant, r.region, r.part, r.trace).Scan(&ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	// The first row is older than the slot: the new slot's catch-up pass publishes it.
	insert(0)
	stream := startProc(t, "relay", env, "run")
	waitStreaming(t, conn, slot, stream)
	for i := 1; i < len(rows); i++ {
		insert(i)
	}
	consumer := testenv.NewConsumer(t, brokers, `outbox\..*`)
	if !consumer.WaitDistinct(60*time.Second, 3) {
		t.Fatalf("consumed %d distinct events, want 3", consumer.Distinct())
	}
	// The row whose partition the topic lacks is the poller's, with the reason.
	testenv.WaitFor(t, 30*time.Second, "the out-of-range partition's row recorded for the poller", func() bool {
		var lastError *string
		err := conn.QueryRow(context.Background(), "SELECT last_error FROM outbox WHERE id = $1", ids[2]).Scan(&lastError)
		return err == nil && lastError != nil && strings.Contains(*lastError, "partition column value 9 is not a partition of topic "+topic)
	})
	hash := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	hashed := func(key string) int32 { return int32(hash.Partition(&kgo.Record{Key: []byte(key)}, 3)) }
	want := map[string]struct {
		value     *string
		partition int32
		headers   []string // after the id header
	}{
		// The router's expansion (table.expand.json.payload; EventRouterTest.
		// canExpandJsonPayloadWithAdditionalFieldInEnvelope) inside the envelope,
		// written by JsonConverter without schemas: the NULL audit column a null.
		ids[0]: {ptr(`{"payload":{"id":1,"lineItems":[{"id":1,"item":"Debezium in Action","quantity":2}],"customerId":123},"auditInfo":null}`), 2, []string{"tenant=acme", "region=eu-west", "eventType=OrderCreated",
			"traceparent=" + traceParent, "tracestate=rojo=00f067aa0ba902b7"}},
		// A NULL header column is a header with a null value, as Kafka Connect's
		// SimpleHeaderConverter writes a null.
		ids[1]: {nil, hashed("2"), []string{"tenant=acme", "region=<null>", "eventType=OrderDeleted", "traceparent=" + traceParent}},
		// A payload that does not start with { stays a string (EventRouterDelegate.parseJsonPayload).
		ids[3]: {ptr(`{"payload":"\"shipped\"","auditInfo":null}`), hashed("4"), []string{"tenant=<null>", "region=<null>", "eventType=OrderShipped"}},
	}
	check := func(phase string, r *kgo.Record) {
		t.Helper()
		id := testenv.Header(r, "id")
		w, ok := want[id]
		if !ok {
			t.Errorf("%s: record of event %s, which has no valid partition", phase, id)
			return
		}
		var headers []string
		for _, h := range r.Headers[1:] {
			v := string(h.Value)
			if h.Value == nil {
				v = "<null>"
			}
			headers = append(headers, h.Key+"="+v)
		}
		agg := rows[slices.Index(ids, id)].aggID
		if r.Topic != topic || string(r.Key) != agg || r.Partition != w.partition || !slices.Equal(headers, w.headers) ||
			(w.value == nil) != (r.Value == nil) || (w.value != nil && string(r.Value) != *w.value) {
			t.Errorf("%s: event %s: topic %s key %q partition %d value %q headers %q\nwant topic %s key %q partition %d value %v headers %q",
				phase, id, r.Topic, r.Key, r.Partition, r.Value, headers, topic, agg, w.partition, w.value, w.headers)
		}
	}
	for _, r := range consumer.Records {
		check("stream", r)
	}
	stream.stop(15 * time.Second)

	// The stream left its rows unmarked (on-publish progress) and the catch-up pass
	// marked its one; with the marks cleared, poll mode publishes every row again, and
	// its records must be the stream's.
	if _, err := conn.Exec(context.Background(), "UPDATE outbox SET processed_at = NULL"); err != nil {
		t.Fatal(err)
	}
	polled := len(consumer.Records)
	poll := startProc(t, "poller", append(env, "WALRELAY_MODE=poll", "WALRELAY_ON_PUBLISH=mark"), "run")
	if !consumer.WaitFor(60*time.Second, func() bool {
		return consumer.Count(ids[0]) >= 2 && consumer.Count(ids[1]) >= 2 && consumer.Count(ids[3]) >= 2
	}) {
		t.Fatalf("poll mode published %d records, want the 3 events again", len(consumer.Records)-polled)
	}
	for _, r := range consumer.Records[polled:] {
		check("poll", r)
	}
	poll.stop(15 * time.Second)
}

func ptr(s string) *string { return &s }
