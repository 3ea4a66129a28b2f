package relay_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/jackc/pgx/v5"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/internal/testregistry"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/schemaregistry"
	"github.com/walrelay/walrelay/sink/sinks"
)

// withRegistry configures Avro keys and values with expanded payloads through reg.
func withRegistry(t *testing.T, reg *testregistry.Registry) func(*config) {
	return func(c *config) {
		client, err := schemaregistry.New(schemaregistry.Config{URLs: []string{reg.URL()}, AutoRegister: true})
		if err != nil {
			t.Fatal(err)
		}
		f := record.Format{KeyConverter: record.Avro, ValueConverter: record.Avro,
			ExpandJSON: record.ExpandJSON{Enabled: true, PayloadColumn: "payload"},
			Schemas:    &record.Schemas{Topic: func(e *outbox.Event) string { return "outbox.event." + e.AggregateType }}}
		c.Sinks.Format = f
		c.Format, c.SchemaRegistry = &f, client
	}
}

// writeShaped writes one row (or, emitted, a table-less event) whose payload has
// the given fields, all set to 1.
func writeShaped(t *testing.T, conn *pgx.Conn, emitted bool, fields ...string) outbox.Event {
	t.Helper()
	ctx := context.Background()
	parts := make([]string, len(fields))
	for i, f := range fields {
		parts[i] = fmt.Sprintf("%q: 1", f)
	}
	ev := outbox.Event{AggregateType: "order", AggregateID: "a", EventType: "shaped", Payload: []byte("{" + strings.Join(parts, ", ") + "}")}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if emitted {
		err = outbox.Emit(ctx, tx, &ev)
	} else {
		err = outbox.Write(ctx, tx, &ev)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return ev
}

// With --delivery exactly-once and value-converter avro: rows and table-less
// events read committed decode with their registered schema, each once; an event
// whose schema is new while the registry is down holds the stream (in its open
// Kafka transaction) and arrives once the registry answers, nothing
// dead-lettered; a refused schema makes a row a dead letter and a table-less event
// a dead-letter row, at their first attempt.
func TestSchemaRegistryExactlyOnce(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	broker := testenv.Kafka(t)
	reg := testregistry.Start()
	t.Cleanup(reg.Close)
	conn := testenv.Connect(t, dbURL)
	startStreaming(t, dbURL, broker, "eo_registry", fastRetries, withRegistry(t, reg),
		func(c *config) { c.Delivery = relay.ExactlyOnce })
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`, kgo.FetchIsolationLevel(kgo.ReadCommitted()))

	want := []outbox.Event{writeShaped(t, conn, false, "n"), writeShaped(t, conn, true, "n"), writeShaped(t, conn, false, "n")}
	if !consumer.WaitDistinct(time.Minute, len(want)) {
		t.Fatalf("%d of %d events before the outage", consumer.Distinct(), len(want))
	}
	reg.SetDown(true)
	want = append(want, writeShaped(t, conn, false, "n")) // cached: goes on
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(want[3].ID) == 1 }) {
		t.Fatal("an event whose schema is cached did not go on while the registry was down")
	}
	held := writeShaped(t, conn, false, "n", "new")
	emittedHeld := writeShaped(t, conn, true, "n", "other")
	consumer.WaitFor(2*time.Second, func() bool { return false }) // consuming while held is the point
	if consumer.Count(held.ID)+consumer.Count(emittedHeld.ID) != 0 {
		t.Fatal("an event was published before its schema was resolved")
	}
	reg.SetDown(false)
	want = append(want, held, emittedHeld)
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(held.ID)*consumer.Count(emittedHeld.ID) > 0 }) {
		t.Fatal("the held events did not arrive once the registry answered")
	}

	reg.Refuse("outbox.event.order-value", "Schema being registered is incompatible with an earlier schema")
	refusedRow := writeShaped(t, conn, false, "refused")
	refusedEmit := writeShaped(t, conn, true, "refused", "too")
	marker := writeShaped(t, conn, false, "n")
	want = append(want, marker)
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(marker.ID) > 0 }) {
		t.Fatalf("marker not delivered: %d distinct", consumer.Distinct())
	}
	for _, ev := range want {
		if n := consumer.Count(ev.ID); n != 1 {
			t.Errorf("event %s (%s) seen %d times, want once", ev.ID, ev.Payload, n)
		}
	}
	for _, rec := range consumer.Records {
		if len(rec.Value) < 5 || rec.Value[0] != 0 {
			t.Fatalf("record %s not framed", testenv.Header(rec, "id"))
		}
		text, _, ok := reg.Schema(int(binary.BigEndian.Uint32(rec.Value[1:5])))
		s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
		var v any
		if !ok || err != nil || avro.Unmarshal(s, rec.Value[5:], &v) != nil || v == nil {
			t.Errorf("record %s does not decode with its registered schema (%v)", testenv.Header(rec, "id"), err)
		}
	}
	for _, ev := range []outbox.Event{refusedRow, refusedEmit} {
		id := ev.ID
		testenv.WaitFor(t, time.Minute, "refused event "+id+" in outbox_events_dead_letters", func() bool {
			var reason string
			err := conn.QueryRow(context.Background(), "SELECT last_error FROM outbox_events_dead_letters WHERE id = $1", id).Scan(&reason)
			return err == nil && strings.Contains(reason, "incompatible")
		})
		if consumer.Count(id) != 0 {
			t.Errorf("refused event %s was published", id)
		}
	}
	var dead int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM outbox_events_dead_letters").Scan(&dead); err != nil || dead != 2 {
		t.Errorf("%d dead letters (%v), want the 2 refused", dead, err)
	}
}

// The NATS sink carries the registry converters' framed bytes as Kafka's does, from
// the catch-up pass and the stream alike:
// value-converter json-schema, each message's data is the magic byte, the id of a
// JSON schema in the registry, then the JSON the JSON converter writes for the
// event (JsonSchemaConverter's value).
func TestSchemaRegistryJSONSchemaOverNATS(t *testing.T) {
	t.Parallel()
	natsURL := testenv.NATS(t)
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	reg := testregistry.Start()
	t.Cleanup(reg.Close)
	suffix := fmt.Sprintf("sr_%d", time.Now().UnixNano())
	t.Cleanup(func() { cleanupBroker(t, sinks.NATS, natsURL, suffix) })
	stream := "WALRELAYTEST_" + strings.ToUpper(suffix)
	// Rows written before the slot exists go through the catch-up pass, the rest
	// through the stream: both resolve their schemas first.
	written := testenv.WriteTx(t, conn, aggregates("js", 3), "before", 10, false)
	rn := startWithBrokers(t, dbURL, nil, "sr_nats", func(c *config) {
		client, err := schemaregistry.New(schemaregistry.Config{URLs: []string{reg.URL()}, AutoRegister: true})
		if err != nil {
			t.Fatal(err)
		}
		f := record.Format{ValueConverter: record.JSONSchema,
			Schemas: &record.Schemas{Topic: func(e *outbox.Event) string { return "walrelaytest." + suffix + "." + e.AggregateType }}}
		c.Sinks.Kind, c.Sinks.NATS.URL, c.Sinks.NATS.Stream = sinks.NATS, natsURL, stream
		c.Sinks.TopicTemplate = "walrelaytest." + suffix + ".{aggregate_type}"
		c.Sinks.Format = f
		c.Format, c.SchemaRegistry = &f, client
	})
	if !rn.waitLog(time.Minute, "msg=streaming") {
		t.Fatal("the relay did not start streaming")
	}
	written = append(written, testenv.WriteTx(t, conn, aggregates("js", 3), "after", 10, false)...)
	waitFor(t, time.Minute, "every row published", func() bool {
		var pending int
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM outbox_events_pending").Scan(&pending); err != nil {
			t.Fatal(err)
		}
		return pending == 0
	})
	nc, err := natsgo.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string][]byte{}
	for seq := uint64(1); seq <= uint64(len(written)); seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		byID[m.Header.Get("id")] = m.Data
	}
	plain := record.Format{ValueConverter: record.JSON}
	for _, ev := range written {
		data := byID[ev.ID]
		if len(data) < 5 || data[0] != 0 {
			t.Fatalf("event %s: not framed: %q", ev.ID, data)
		}
		text, typ, ok := reg.Schema(int(binary.BigEndian.Uint32(data[1:5])))
		if !ok || typ != "JSON" || !strings.Contains(text, "io.debezium.data.Json") {
			t.Errorf("event %s: schema %q %q %v", ev.ID, typ, text, ok)
		}
		e := ev
		e.PayloadType = "jsonb"
		want, _ := plain.Value(&e)
		// jsonb normalises the document the JSON string holds: compare the framing
		// and that the rest is the JSON converter's string.
		if !strings.HasPrefix(string(data[5:]), `"{`) || !strings.HasPrefix(string(want), `"{`) {
			t.Errorf("event %s: value %q, want the JSON converter's string", ev.ID, data[5:])
		}
	}
}
