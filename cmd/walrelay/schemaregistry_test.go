package main_test

import (
	"bytes"
	"context"
	be "encoding/binary"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/internal/testregistry"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
)

// The tables of the schema registry test: one per shape the outbox router
// publishes, each its own aggregate type, so its own topic and subject.
const registryTables = `
CREATE TABLE sr_text (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregate_type text NOT NULL DEFAULT 'txt',
  aggregate_id text NOT NULL, event_type text NOT NULL DEFAULT 'e', payload text, created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE sr_jsonb (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregate_type text NOT NULL DEFAULT 'js',
  aggregate_id text NOT NULL, event_type text NOT NULL DEFAULT 'e', payload jsonb, created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE sr_bytea (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregate_type text NOT NULL DEFAULT 'bin',
  aggregate_id text NOT NULL, event_type text NOT NULL DEFAULT 'e', payload bytea, created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE sr_env (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregate_type text NOT NULL DEFAULT 'env',
  aggregate_id text NOT NULL, event_type text NOT NULL DEFAULT 'e', payload jsonb, kind text, created_at timestamptz NOT NULL DEFAULT now());
`

const registryTablesYAML = `tables:
  - table: sr_text
  - table: sr_jsonb
  - table: sr_bytea
  - table: sr_env
    column-envelope: kind
`

// registryRun is one relay streaming the four tables with Avro keys and values.
type registryRun struct {
	t        *testing.T
	reg      *testregistry.Registry
	conn     *pgx.Conn
	consumer *testenv.Consumer
	relay    *proc
	admin    string
	env      []string
	slot     string
}

// wrote is an event the test inserted and what its record must decode to.
type wrote struct {
	id    string
	key   string
	value any
}

func (r *registryRun) insert(table, cols string, args ...any) string {
	r.t.Helper()
	ph := make([]string, len(args))
	for i := range args {
		ph[i] = fmt.Sprintf("$%d", i+1)
	}
	var id string
	err := r.conn.QueryRow(context.Background(), "INSERT INTO "+table+" ("+cols+") VALUES ("+strings.Join(ph, ",")+") RETURNING id::text",
		args...).Scan(&id)
	if err != nil {
		r.t.Fatal(err)
	}
	return id
}

// decode reads a record as a Confluent deserializer would: magic byte, schema id,
// the schema fetched from the registry by id, then the Avro binary decoded with
// hamba/avro against it.
func (r *registryRun) decode(b []byte) any {
	r.t.Helper()
	if len(b) < 5 || b[0] != 0 {
		r.t.Fatalf("not Confluent's wire format: % x", b)
	}
	id := int(be.BigEndian.Uint32(b[1:5]))
	text, typ, ok := r.reg.Schema(id)
	if !ok || typ != "AVRO" {
		r.t.Fatalf("schema id %d not in the registry (%q %v)", id, typ, ok)
	}
	s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		r.t.Fatalf("registered schema %d does not parse: %v\n%s", id, err, text)
	}
	var v any
	if err := avro.Unmarshal(s, b[5:], &v); err != nil {
		r.t.Fatalf("decode with schema %d: %v", id, err)
	}
	return v
}

// check waits for every event of want and checks its key and value decode to what
// was written.
func (r *registryRun) check(want []wrote) {
	r.t.Helper()
	ids := map[string]bool{}
	for _, w := range want {
		ids[w.id] = true
	}
	if !r.consumer.WaitFor(time.Minute, func() bool {
		for id := range ids {
			if r.consumer.Count(id) == 0 {
				return false
			}
		}
		return true
	}) {
		r.t.Fatalf("not every event arrived: %d distinct consumed", r.consumer.Distinct())
	}
	byID := map[string]*kgo.Record{}
	for _, rec := range r.consumer.Records {
		byID[testenv.Header(rec, "id")] = rec
	}
	for _, w := range want {
		rec := byID[w.id]
		if got := r.decode(rec.Key); got != w.key {
			r.t.Errorf("event %s: key decodes to %#v, want %q", w.id, got, w.key)
		}
		if got := r.decode(rec.Value); !reflect.DeepEqual(got, w.value) {
			r.t.Errorf("event %s on %s: value decodes to %#v, want %#v", w.id, rec.Topic, got, w.value)
		}
	}
}

func (r *registryRun) get(path string) (int, string) {
	r.t.Helper()
	resp, err := http.Get("http://" + r.admin + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (r *registryRun) walsender() int {
	r.t.Helper()
	var pid int
	if err := r.conn.QueryRow(context.Background(), "SELECT coalesce(active_pid, 0) FROM pg_replication_slots WHERE slot_name = $1",
		r.slot).Scan(&pid); err != nil {
		r.t.Fatal(err)
	}
	return pid
}

func (r *registryRun) deadLetters() int {
	r.t.Helper()
	n := 0
	for _, tbl := range []string{"sr_text", "sr_jsonb", "sr_bytea", "sr_env"} {
		var c int
		if err := r.conn.QueryRow(context.Background(), "SELECT count(*) FROM "+tbl+"_dead_letters").Scan(&c); err != nil {
			r.t.Fatal(err)
		}
		n += c
	}
	return n
}

// PostgreSQL -> the walrelay binary -> kfake, one relay streaming four tables
// with key-converter and value-converter avro through the tests' registry: text,
// jsonb, expanded JSON, bytea and envelope records decode with the schema their
// id names in the registry; schemas are registered once, not per event; a
// registry outage longer than wal_sender_timeout while an event needs a schema not
// cached holds the stream (the walsender survives, /readyz says why,
// walrelay_schema_registry_up is 0, status exits 6) while events whose schemas
// are cached go on, and everything arrives after with nothing dead-lettered; a
// schema the registry refuses dead-letters its event at the first attempt. Poll
// mode, with a cache of its own, publishes nothing while the registry is down and
// counts no attempt, then publishes alike; so does walrelay replay.
func TestSchemaRegistryAvroEndToEnd(t *testing.T) {
	t.Parallel()
	const senderTimeout = 2 * time.Second
	dbURL := testenv.Database(t)
	kafka := testenv.Kafka(t)
	reg := testregistry.Start()
	t.Cleanup(reg.Close)
	execSQL(t, dbURL, registryTables)
	r := &registryRun{t: t, reg: reg, admin: testenv.FreeAddr(t), slot: slotName(t, "")}
	relayURL := testenv.WithParams(dbURL, map[string]string{"wal_sender_timeout": senderTimeout.String()})
	r.env = relayEnv(relayURL, kafka.ListenAddrs(), "WALRELAY_CONFIG="+writeFile(t, "walrelay.yaml", registryTablesYAML),
		"WALRELAY_SLOT="+r.slot, "WALRELAY_PUBLICATION="+r.slot, "WALRELAY_METRICS_ADDR="+r.admin,
		"WALRELAY_KEY_CONVERTER=avro", "WALRELAY_VALUE_CONVERTER=avro", "WALRELAY_SCHEMA_REGISTRY_URL="+reg.URL(),
		"WALRELAY_EXPAND_JSON_PAYLOAD=true", "WALRELAY_TOPIC_PREFIX=dbserver1")
	if res := run(t, time.Minute, r.env, "migrate"); res.code != 0 {
		t.Fatalf("migrate: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	r.conn = testenv.Connect(t, dbURL)
	r.relay = startProc(t, "relay", r.env, "run")
	waitStreaming(t, r.conn, r.slot, r.relay)
	r.consumer = testenv.NewConsumer(t, kafka.ListenAddrs(), `outbox\.event\..*`)

	// Every shape, twice over: the second round needs no registry call.
	shapes := func(round int) []wrote {
		tag := fmt.Sprint(round)
		return []wrote{
			{r.insert("sr_text", "aggregate_id, payload", "t"+tag, "hello "+tag), "t" + tag, "hello " + tag},
			// A jsonb array does not expand: the io.debezium.data.Json string.
			{r.insert("sr_jsonb", "aggregate_id, payload", "j"+tag, `[1, 2]`), "j" + tag, "[1, 2]"},
			{r.insert("sr_jsonb", "aggregate_id, payload", "x"+tag, `{"n": 1, "who": {"name": "ann"}}`), "x" + tag,
				map[string]any{"payload": map[string]any{"n": 1, "who": map[string]any{"payload.who": map[string]any{"name": "ann"}}}}},
			{r.insert("sr_bytea", "aggregate_id, payload", "b"+tag, []byte{0, 1, 2, 0xff}), "b" + tag, []byte{0, 1, 2, 0xff}},
			{r.insert("sr_env", "aggregate_id, payload, kind", "e"+tag, `"text"`, "created"), "e" + tag,
				map[string]any{"payload": `"text"`, "kind": "created"}},
		}
	}
	round1 := shapes(1)
	r.check(round1)
	registered := reg.Calls("POST /subjects/{subject}/versions")
	if registered == 0 || len(reg.Subjects()) < 5 {
		t.Fatalf("%d registrations, subjects %v", registered, reg.Subjects())
	}
	r.check(shapes(2))
	if n := reg.Calls("POST /subjects/{subject}/versions"); n != registered {
		t.Errorf("the second round of the same shapes made %d more registry calls, want none: ids are cached", n-registered)
	}

	// The registry goes down: events whose schemas are cached go on.
	pid := r.walsender()
	reg.SetDown(true)
	cached := shapes(3)
	r.check(cached)
	// One needs a schema not seen yet: the stream holds it, and what follows.
	newShape := r.insert("sr_jsonb", "aggregate_id, payload", "n1", `{"n": 1, "extra": true}`)
	after := r.insert("sr_text", "aggregate_id, payload", "t4", "after")
	held := time.Now()
	testenv.WaitFor(t, 30*time.Second, "/readyz 503 naming the schema registry", func() bool {
		code, body := r.get("/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "schema registry")
	})
	if _, body := r.get("/metrics"); !strings.Contains(body, "walrelay_schema_registry_up 0") {
		t.Errorf("walrelay_schema_registry_up is not 0 while the registry is down")
	}
	waitStatus(t, 30*time.Second, 6, r.env, "--admin-url", "http://"+r.admin)
	// Held for three sender timeouts: the walsender must stay the same process.
	for time.Since(held) < 3*senderTimeout {
		if p := r.walsender(); p != pid {
			t.Fatalf("walsender changed from pid %d to %d while the stream was held", pid, p)
		}
		if r.consumer.Count(newShape) > 0 || r.consumer.Count(after) > 0 {
			t.Fatal("an event was published while its schema (or an earlier event's) could not be resolved")
		}
		time.Sleep(100 * time.Millisecond) // sampling a state over time is the point here
	}
	if !strings.Contains(r.relay.output.String(), "schema registry does not answer") ||
		!strings.Contains(r.relay.output.String(), "outbox.event.js-value") {
		t.Error("no WARN naming the subject while the registry was down")
	}
	reg.SetDown(false)
	r.check([]wrote{{newShape, "n1", map[string]any{"payload": map[string]any{"n": 1, "extra": true}}}, {after, "t4", "after"}})
	if p := r.walsender(); p != pid {
		t.Errorf("walsender changed from pid %d to %d", pid, p)
	}
	if n := r.deadLetters(); n != 0 {
		t.Errorf("%d dead letters after the outage, want none", n)
	}
	testenv.WaitFor(t, 30*time.Second, "/readyz 200 after the outage", func() bool {
		code, _ := r.get("/readyz")
		return code == http.StatusOK
	})

	// A schema the registry refuses: its event is a dead letter at once, with the
	// registry's message; the stream goes on.
	reg.Refuse("outbox.event.js-value", "Schema being registered is incompatible with an earlier schema")
	refused := r.insert("sr_jsonb", "aggregate_id, payload", "r1", `{"refused": 1}`)
	next := r.insert("sr_text", "aggregate_id, payload", "t5", "cached still")
	r.check([]wrote{{next, "t5", "cached still"}})
	var attempts int
	var reason string
	testenv.WaitFor(t, 30*time.Second, "the refused event in sr_jsonb_dead_letters", func() bool {
		err := r.conn.QueryRow(context.Background(), "SELECT attempts, last_error FROM sr_jsonb_dead_letters WHERE id = $1", refused).
			Scan(&attempts, &reason)
		return err == nil
	})
	if attempts != 1 || !strings.Contains(reason, "incompatible with an earlier schema") || r.consumer.Count(refused) != 0 {
		t.Errorf("dead letter after %d attempt(s): %q; published %d times", attempts, reason, r.consumer.Count(refused))
	}
	if _, body := r.get("/metrics"); !strings.Contains(body, `walrelay_schema_refused_events_total{subject="outbox.event.js-value"} 1`) {
		t.Errorf("walrelay_schema_refused_events_total not counted:\n%s", grepLines(body, "schema"))
	}
	r.relay.stop(15 * time.Second)

	// Poll mode resolves the same way, with a cache of its own: while the registry
	// is down nothing is published and no attempt is counted; once it answers,
	// every row the stream left unmarked is published again, framed alike.
	reg.SetDown(true)
	records := len(r.consumer.Records)
	poller := startProc(t, "poller", append(r.env, "WALRELAY_MODE=poll", "WALRELAY_ON_PUBLISH=mark"), "run")
	testenv.WaitFor(t, 30*time.Second, "the poller's WARN that the registry does not answer", func() bool {
		return strings.Contains(poller.output.String(), "schema registry does not answer")
	})
	r.consumer.WaitFor(time.Second, func() bool { return false })
	if n := len(r.consumer.Records) - records; n != 0 {
		t.Fatalf("%d records published by the poller while the registry was down", n)
	}
	if n := r.deadLetters(); n != 1 {
		t.Fatalf("%d dead letters while the poller could not resolve schemas, want the one refused", n)
	}
	reg.SetDown(false)
	fresh := shapes(5) // written while only the poller runs
	republished := append(cached, wrote{after, "t4", "after"})
	if !r.consumer.WaitFor(time.Minute, func() bool {
		for _, w := range republished {
			if r.consumer.Count(w.id) < 2 {
				return false
			}
		}
		return true
	}) {
		t.Fatal("the poller did not publish the rows again once the registry answered")
	}
	r.check(append(fresh, republished...)) // the last record of each id: the poller's
	poller.stop(15 * time.Second)

	// walrelay replay resolves alike, with a cache of its own.
	replayed := round1[0]
	before := r.consumer.Count(replayed.id)
	if res := run(t, time.Minute, r.env, "replay", "--aggregate-id", replayed.key); res.code != 0 {
		t.Fatalf("replay: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if !r.consumer.WaitFor(time.Minute, func() bool { return r.consumer.Count(replayed.id) > before }) {
		t.Fatal("replay did not publish the event again")
	}
	r.check([]wrote{replayed})
}

// What the registry converters cannot do is refused at start (exit 2), saying
// what to set: SQS carries text only (the message names the sinks that carry
// bytes), a registry URL is needed, and the
// record-based subject strategies need a schema with a record name. A
// schema-registry-basic-auth password is never printed.
func TestSchemaRegistrySettingsRefused(t *testing.T) {
	t.Parallel()
	env := relayEnv("postgres://relay@127.0.0.1:1/none", []string{"127.0.0.1:1"},
		"WALRELAY_SCHEMA_REGISTRY_BASIC_AUTH=relay:topsecret-pw")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sink", "sqs", "--sqs-region", "eu-west-1", "--value-converter", "avro", "--schema-registry-url", "http://127.0.0.1:1"},
			"use --sink kafka, nats, rabbitmq, redis, pubsub, http"},
		{[]string{"--value-converter", "avro"}, "schema-registry-url is empty"},
		{[]string{"--value-converter", "avro", "--schema-registry-url", "http://127.0.0.1:1", "--value-subject-name-strategy", "record"},
			"needs a value schema with a record name"},
		{[]string{"--key-converter", "avro", "--schema-registry-url", "http://127.0.0.1:1", "--key-subject-name-strategy", "topic-record"},
			"set key-subject-name-strategy topic"},
		{[]string{"--value-converter", "avro", "--schema-registry-url", "http://127.0.0.1:1", "--value-subject-name-strategy", "bogus"},
			"is not topic, record or topic-record"},
	} {
		res := run(t, 30*time.Second, env, append([]string{"run"}, tc.args...)...)
		if res.code != 2 || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("run %v: exit %d, want 2 with %q\n%s", tc.args, res.code, tc.want, res.stderr)
		}
		if strings.Contains(res.stderr+res.stdout, "topsecret-pw") {
			t.Errorf("run %v printed the registry password", tc.args)
		}
	}
}

// value-converter and key-converter protobuf through the binary: each record is
// framed with the id of a PROTOBUF schema the relay registered, and after the
// header carries the bytes package record writes for the event (its message
// indexes and message; record/protobuf.go's tests check those against
// ProtobufConverter's).
func TestSchemaRegistryProtobufEndToEnd(t *testing.T) {
	t.Parallel()
	dbURL := testenv.Database(t)
	kafka := testenv.Kafka(t)
	reg := testregistry.Start()
	t.Cleanup(reg.Close)
	execSQL(t, dbURL, registryTables)
	slot := slotName(t, "")
	env := relayEnv(dbURL, kafka.ListenAddrs(), "WALRELAY_CONFIG="+writeFile(t, "walrelay.yaml", registryTablesYAML),
		"WALRELAY_SLOT="+slot, "WALRELAY_PUBLICATION="+slot, "WALRELAY_KEY_CONVERTER=protobuf", "WALRELAY_VALUE_CONVERTER=protobuf",
		"WALRELAY_SCHEMA_REGISTRY_URL="+reg.URL(), "WALRELAY_EXPAND_JSON_PAYLOAD=true", "WALRELAY_TOPIC_PREFIX=dbserver1")
	if res := run(t, time.Minute, env, "migrate"); res.code != 0 {
		t.Fatalf("migrate: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	r := &registryRun{t: t, reg: reg, conn: testenv.Connect(t, dbURL), slot: slot}
	r.relay = startProc(t, "relay", env, "run")
	waitStreaming(t, r.conn, slot, r.relay)
	consumer := testenv.NewConsumer(t, kafka.ListenAddrs(), `outbox\.event\..*`)
	events := map[string]*outbox.Event{
		r.insert("sr_text", "aggregate_id, payload", "t1", "hello"): {AggregateType: "txt", AggregateID: "t1", Payload: []byte("hello"), PayloadType: "text"},
		r.insert("sr_bytea", "aggregate_id, payload", "b1", []byte{0, 0xff}): {AggregateType: "bin", AggregateID: "b1", Payload: []byte{0, 0xff},
			PayloadType: "bytea"},
		r.insert("sr_jsonb", "aggregate_id, payload", "x1", `{"n": 1, "who": "ann"}`): {AggregateType: "js", AggregateID: "x1",
			Payload: []byte(`{"n": 1, "who": "ann"}`), PayloadType: "jsonb"},
	}
	if !consumer.WaitDistinct(time.Minute, len(events)) {
		t.Fatalf("%d of %d events arrived", consumer.Distinct(), len(events))
	}
	f := record.Format{KeyConverter: record.Protobuf, ValueConverter: record.Protobuf,
		ExpandJSON: record.ExpandJSON{Enabled: true, PayloadColumn: "payload"}}
	for _, rec := range consumer.Records {
		e := events[testenv.Header(rec, "id")]
		for side, b := range map[string][]byte{"key": rec.Key, "value": rec.Value} {
			if len(b) < 5 || b[0] != 0 {
				t.Fatalf("%s of %s not framed: % x", side, e.AggregateID, b)
			}
			if _, typ, ok := reg.Schema(int(be.BigEndian.Uint32(b[1:5]))); !ok || typ != "PROTOBUF" {
				t.Errorf("%s of %s: schema id not a PROTOBUF schema in the registry (%q %v)", side, e.AggregateID, typ, ok)
			}
		}
		want, _ := f.Value(e)
		if !bytes.Equal(rec.Value[5:], want[5:]) {
			t.Errorf("value of %s: % x after the header, want % x", e.AggregateID, rec.Value[5:], want[5:])
		}
	}
	r.relay.stop(15 * time.Second)
}

// A connector on Confluent's AvroConverter, imported by import-debezium, runs
// as it is: the imported settings reach the registry, and the stream's records,
// then poll mode's, carry the jsonb payload as Avro's io.debezium.data.Json
// string under a registered schema, the key as the StringConverter writes it.
func TestDebeziumAvroConnectorRuns(t *testing.T) {
	t.Parallel()
	reg := testregistry.Start()
	t.Cleanup(reg.Close)
	connector := `{"name": "outbox-connector", "config": {
		"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
		"plugin.name": "pgoutput", "table.include.list": "public.outbox",
		"key.converter": "org.apache.kafka.connect.storage.StringConverter",
		"value.converter": "io.confluent.connect.avro.AvroConverter",
		"value.converter.schema.registry.url": "` + reg.URL() + `",
		"transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"}}`
	e := startDebeziumE2E(t, debeziumSetup{
		table: `CREATE TABLE outbox (id uuid NOT NULL PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
			aggregateid varchar(255) NOT NULL, payload jsonb)`,
		connector: connector, catalog: true, topics: []string{"outbox.event.order"}, partitions: 1,
	})
	ids := []string{
		e.insert(`INSERT INTO outbox VALUES (gen_random_uuid(), 'order', 'ord-1', '{"n": 1}') RETURNING id::text`),
		e.insert(`INSERT INTO outbox VALUES (gen_random_uuid(), 'order', 'ord-2', '[2]') RETURNING id::text`),
	}
	r := &registryRun{t: t, reg: reg}
	recs := e.records(`outbox\..*`, ids)
	if len(recs) != 2*len(ids) {
		t.Fatalf("%d records, want each event from the stream and from poll mode", len(recs))
	}
	for _, rec := range recs {
		want := map[string]string{ids[0]: `{"n": 1}`, ids[1]: `[2]`}[testenv.Header(rec, "id")]
		if got := r.decode(rec.Value); got != want {
			t.Errorf("value decodes to %#v, want %q", got, want)
		}
		if k := string(rec.Key); k != "ord-1" && k != "ord-2" {
			t.Errorf("key %q, want the aggregate id as StringConverter writes it", k)
		}
	}
	if subjects := reg.Subjects(); len(subjects) != 1 || subjects[0] != "outbox.event.order-value" {
		t.Errorf("subjects %v, want outbox.event.order-value", subjects)
	}
}
