package main_test

import (
	"bytes"
	"context"
	be "encoding/binary"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/internal/testregistry"
)

const nativeTable = `
CREATE TABLE native_outbox (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregate_type text NOT NULL DEFAULT 'shop',
  aggregate_id text NOT NULL, event_type text NOT NULL, payload bytea, msg text, created_at timestamptz NOT NULL DEFAULT now());
`

// nativeRun is one relay streaming native_outbox with native-payload, and the
// registry the service registered its schema in.
type nativeRun struct {
	*registryRun
	consumer *testenv.Consumer
}

func startNative(t *testing.T, reg *testregistry.Registry, extra ...string) *nativeRun {
	dbURL := testenv.Database(t)
	kafka := testenv.Kafka(t)
	execSQL(t, dbURL, nativeTable)
	slot, admin := slotName(t, ""), testenv.FreeAddr(t)
	env := relayEnv(dbURL, kafka.ListenAddrs(), append([]string{"WALRELAY_TABLE=native_outbox", "WALRELAY_METRICS_ADDR=" + admin,
		"WALRELAY_SLOT=" + slot, "WALRELAY_PUBLICATION=" + slot, "WALRELAY_SCHEMA_REGISTRY_URL=" + reg.URL(),
		"WALRELAY_NATIVE_PAYLOAD=true", "WALRELAY_COLUMN_HEADERS=msg"}, extra...)...)
	if res := run(t, time.Minute, env, "migrate"); res.code != 0 {
		t.Fatalf("migrate: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	r := &registryRun{t: t, reg: reg, conn: testenv.Connect(t, dbURL), slot: slot, admin: admin, env: env}
	r.relay = startProc(t, "relay", env, "run")
	waitStreaming(t, r.conn, slot, r.relay)
	return &nativeRun{registryRun: r, consumer: testenv.NewConsumer(t, kafka.ListenAddrs(), `outbox\.event\..*`)}
}

// register registers a schema as the service's own serializer would, with
// franz-go's registry client.
func register(t *testing.T, reg *testregistry.Registry, subject string, s sr.Schema) int {
	t.Helper()
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	id, err := cl.RegisterSchema(context.Background(), subject, s, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// deadLetter waits for event id's dead letter and returns its reason.
func (n *nativeRun) deadLetter(id string) string {
	n.t.Helper()
	var reason string
	testenv.WaitFor(n.t, time.Minute, "the dead letter of "+id, func() bool {
		return n.conn.QueryRow(context.Background(), "SELECT last_error FROM native_outbox_dead_letters WHERE id = $1", id).Scan(&reason) == nil
	})
	return reason
}

// deadLetters counts native_outbox's dead letters.
func (n *nativeRun) deadLetters() int {
	n.t.Helper()
	var c int
	if err := n.conn.QueryRow(context.Background(), "SELECT count(*) FROM native_outbox_dead_letters").Scan(&c); err != nil {
		n.t.Fatal(err)
	}
	return c
}

// records waits for the events and returns their records by id.
func (n *nativeRun) records(ids ...string) map[string]*kgo.Record {
	n.t.Helper()
	if !n.consumer.WaitFor(time.Minute, func() bool {
		for _, id := range ids {
			if n.consumer.Count(id) == 0 {
				return false
			}
		}
		return true
	}) {
		n.t.Fatalf("%d of %d events arrived", n.consumer.Distinct(), len(ids))
	}
	out := map[string]*kgo.Record{}
	for _, rec := range n.consumer.Records {
		out[testenv.Header(rec, "id")] = rec
	}
	return out
}

const nativeOrderSchema = `{"type":"record","name":"OrderPlaced","namespace":"shop","fields":[
	{"name":"order_id","type":"string"},{"name":"cents","type":"long"}]}`

type orderPlaced struct {
	OrderID string `avro:"order_id"`
	Cents   int64  `avro:"cents"`
}

// PostgreSQL -> the walrelay binary -> kfake with native-payload and
// value-converter avro: the service's Avro bytes in a bytea payload reach Kafka
// framed with the id of the subject's latest version ({aggregate_type}.{event_type}),
// and decode with hamba/avro against the schema that id names in the registry; a
// payload a serializer framed already arrives byte for byte; bytes that are not
// the schema's Avro, and a subject the registry lacks, are dead letters with
// their reason; the subject's schema is fetched once, not per event; while the
// registry does not answer an event whose schema is not cached is held, not
// dead-lettered, and once cached events go on through an outage.
func TestNativePayloadAvroEndToEnd(t *testing.T) {
	t.Parallel()
	reg := testregistry.Start()
	t.Cleanup(reg.Close)
	id := register(t, reg, "shop.placed", sr.Schema{Schema: nativeOrderSchema, Type: sr.TypeAvro})
	n := startNative(t, reg, "WALRELAY_VALUE_CONVERTER=avro", "WALRELAY_NATIVE_PAYLOAD_SUBJECT={aggregate_type}.{event_type}")
	s := avro.MustParse(nativeOrderSchema)
	enc := func(v orderPlaced) []byte {
		b, err := avro.Marshal(s, v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	raw1, raw2 := enc(orderPlaced{"o-1", 1250}), enc(orderPlaced{"o-2", 99})
	framed := append(be.BigEndian.AppendUint32([]byte{0}, uint32(id)), enc(orderPlaced{"o-3", 7})...)
	ins := func(eventType string, p []byte) string {
		return n.insert("native_outbox", "aggregate_id, event_type, payload", "a", eventType, p)
	}
	// The registry is down before the first event: it is held, /readyz says why.
	reg.SetDown(true)
	first := ins("placed", raw1)
	testenv.WaitFor(t, 30*time.Second, "/readyz 503 naming the schema registry", func() bool {
		code, body := n.get("/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "shop.placed")
	})
	if n.consumer.Count(first) != 0 || n.deadLetters() != 0 {
		t.Fatal("an event whose schema could not be fetched was published or dead-lettered")
	}
	reg.SetDown(false)
	good := map[string]orderPlaced{first: {"o-1", 1250}, ins("placed", raw2): {"o-2", 99}}
	pre := ins("placed", framed)
	bad := ins("placed", []byte{0x0a, 'o', '-', '4'}) // a string of 5 bytes with 3, no cents
	missing := ins("shipped", raw1)
	recs := n.records(append([]string{pre}, keys(good)...)...)
	for eid, want := range good {
		rec := recs[eid]
		if got := n.decode(rec.Value); got.(map[string]any)["order_id"] != want.OrderID || got.(map[string]any)["cents"] != want.Cents {
			t.Errorf("event %s decodes to %#v, want %+v", eid, got, want)
		}
		if got := int(be.BigEndian.Uint32(rec.Value[1:5])); got != id {
			t.Errorf("event %s framed with id %d, want the subject's %d", eid, got, id)
		}
	}
	if v := recs[pre].Value; !bytes.Equal(v, framed) {
		t.Errorf("pre-framed payload arrived as % x, want it as it was, % x", v, framed)
	}
	if reason := n.deadLetter(bad); !strings.Contains(reason, "not Avro binary of the schema of subject shop.placed") {
		t.Errorf("dead letter of the bad payload: %q", reason)
	}
	if reason := n.deadLetter(missing); !strings.Contains(reason, "shop.shipped") || !strings.Contains(reason, "404") {
		t.Errorf("dead letter of the missing subject: %q", reason)
	}
	if n.consumer.Count(bad)+n.consumer.Count(missing) != 0 {
		t.Errorf("dead-lettered events were published too")
	}
	// Cached: the stream goes on through an outage.
	reg.SetDown(true)
	during := ins("placed", raw2)
	n.records(during)
	reg.SetDown(false)
	if c := reg.Calls("GET /subjects/{subject}/versions/latest"); c != 2 {
		t.Errorf("%d fetches of a latest version, want 2: shop.placed once for 5 events, shop.shipped once", c)
	}
	n.relay.stop(15 * time.Second)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

const nativeShopProto = `syntax = "proto3";
package shop;
message Placed { string order_id = 1; int64 cents = 2; }
message Cancelled { string order_id = 1; string reason = 2; }
`

// PostgreSQL -> the walrelay binary -> kfake with native-payload and
// value-converter protobuf, the message named by a column placed as a header:
// each record carries the id and the message indexes of its message, read here
// as Confluent's deserializer reads them, and decodes with dynamicpb against
// the registry's schema compiled by protocompile; a payload framed already
// arrives as it was; a message the schema lacks and bytes that are not the
// message are dead letters with their reason; poll mode frames alike.
func TestNativePayloadProtobufEndToEnd(t *testing.T) {
	t.Parallel()
	reg := testregistry.Start()
	t.Cleanup(reg.Close)
	id := register(t, reg, "outbox.event.shop-value", sr.Schema{Schema: nativeShopProto, Type: sr.TypeProtobuf})
	n := startNative(t, reg, "WALRELAY_VALUE_CONVERTER=protobuf", "WALRELAY_NATIVE_PAYLOAD_MESSAGE_HEADER=msg")

	c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"shop.proto": nativeShopProto})}}
	files, err := c.Compile(context.Background(), "shop.proto")
	if err != nil {
		t.Fatal(err)
	}
	msg := func(name string, kv ...any) []byte {
		m := dynamicpb.NewMessage(files[0].Messages().ByName(protoreflect.Name(name)))
		for i := 0; i < len(kv); i += 2 {
			m.Set(m.Descriptor().Fields().ByName(protoreflect.Name(kv[i].(string))), protoreflect.ValueOf(kv[i+1]))
		}
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ins := func(message string, p []byte) string {
		return n.insert("native_outbox", "aggregate_id, event_type, msg, payload", "a", "e", message, p)
	}
	placed := ins("shop.Placed", msg("Placed", "order_id", "o-1", "cents", int64(1250)))
	cancelled := ins("shop.Cancelled", msg("Cancelled", "order_id", "o-2", "reason", "late"))
	framed := append(be.BigEndian.AppendUint32([]byte{0}, uint32(id)), 2, 2) // indexes [1]: Cancelled
	framed = append(framed, msg("Cancelled", "order_id", "o-3")...)
	pre := ins("shop.Cancelled", framed)
	unknown := ins("shop.Shipped", msg("Placed", "order_id", "o-4"))
	malformed := ins("shop.Placed", []byte{0x12, 0x05, 'x'}) // cents as bytes, cut short
	recs := n.records(placed, cancelled, pre)

	// decode reads the record as Confluent's deserializer does: magic byte, id,
	// message indexes, then the message the indexes name in the registry's schema.
	decode := func(b []byte) *dynamicpb.Message {
		t.Helper()
		if len(b) < 6 || b[0] != 0 {
			t.Fatalf("not Confluent's wire format: % x", b)
		}
		text, typ, ok := reg.Schema(int(be.BigEndian.Uint32(b[1:5])))
		if !ok || typ != "PROTOBUF" {
			t.Fatalf("schema id not a PROTOBUF schema in the registry")
		}
		c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(map[string]string{"s.proto": text})}}
		fs, err := c.Compile(context.Background(), "s.proto")
		if err != nil {
			t.Fatal(err)
		}
		rest := b[5:]
		count, m := protowire.ConsumeVarint(rest)
		rest = rest[m:]
		path := []int64{0}
		if protowire.DecodeZigZag(count) > 0 {
			path = path[:0]
			for range protowire.DecodeZigZag(count) {
				v, m := protowire.ConsumeVarint(rest)
				rest = rest[m:]
				path = append(path, protowire.DecodeZigZag(v))
			}
		}
		md := fs[0].Messages().Get(int(path[0]))
		for _, i := range path[1:] {
			md = md.Messages().Get(int(i))
		}
		out := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(rest, out); err != nil {
			t.Fatalf("decode as %s: %v", md.FullName(), err)
		}
		return out
	}
	field := func(m *dynamicpb.Message, name string) any {
		return m.Get(m.Descriptor().Fields().ByName(protoreflect.Name(name))).Interface()
	}
	if m := decode(recs[placed].Value); m.Descriptor().FullName() != "shop.Placed" || field(m, "cents") != int64(1250) {
		t.Errorf("placed decodes to %v %v", m.Descriptor().FullName(), m)
	}
	if m := decode(recs[cancelled].Value); m.Descriptor().FullName() != "shop.Cancelled" || field(m, "reason") != "late" {
		t.Errorf("cancelled decodes to %v %v", m.Descriptor().FullName(), m)
	}
	if v := recs[pre].Value; !bytes.Equal(v, framed) {
		t.Errorf("pre-framed payload arrived as % x, want it as it was, % x", v, framed)
	}
	if m := decode(recs[pre].Value); field(m, "order_id") != "o-3" {
		t.Errorf("pre-framed decodes to %v", m)
	}
	if reason := n.deadLetter(unknown); !strings.Contains(reason, "message shop.Shipped is not in the Protobuf schema") {
		t.Errorf("dead letter of the unknown message: %q", reason)
	}
	if reason := n.deadLetter(malformed); !strings.Contains(reason, "not a Protobuf shop.Placed") {
		t.Errorf("dead letter of the malformed payload: %q", reason)
	}
	if c := reg.Calls("GET /subjects/{subject}/versions/latest"); c != 1 {
		t.Errorf("%d fetches of a latest version, want 1 for 5 events", c)
	}
	n.relay.stop(15 * time.Second)

	// Poll mode publishes the rows the stream left unmarked again, through its
	// own cache (one more fetch), framed byte for byte alike.
	stream := map[string][]byte{}
	for _, id := range []string{placed, cancelled, pre} {
		stream[id] = recs[id].Value
	}
	poller := startProc(t, "poller", append(n.env, "WALRELAY_MODE=poll", "WALRELAY_ON_PUBLISH=mark"), "run")
	if !n.consumer.WaitFor(time.Minute, func() bool {
		for id := range stream {
			if n.consumer.Count(id) < 2 {
				return false
			}
		}
		return true
	}) {
		t.Fatal("the poller did not publish the rows again")
	}
	for _, rec := range n.consumer.Records {
		if want, ok := stream[testenv.Header(rec, "id")]; ok && !bytes.Equal(rec.Value, want) {
			t.Errorf("event %s: % x from one publisher, % x from the stream", testenv.Header(rec, "id"), rec.Value, want)
		}
	}
	if c := reg.Calls("GET /subjects/{subject}/versions/latest"); c != 2 {
		t.Errorf("%d fetches of a latest version, want 2: the stream's and the poller's", c)
	}
	poller.stop(15 * time.Second)
}

// native-payload's settings are checked at start, exit 2, naming what to set.
func TestNativePayloadSettingsRefused(t *testing.T) {
	t.Parallel()
	env := relayEnv("postgres://relay@127.0.0.1:1/none", []string{"127.0.0.1:1"})
	reg := []string{"--schema-registry-url", "http://127.0.0.1:1", "--native-payload"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append([]string{"--value-converter", "json"}, reg...), "native-payload needs value-converter avro or protobuf"},
		{append([]string{"--value-converter", "avro", "--native-payload-subject", "{table}-value"}, reg...), "it may name {topic}"},
		{append([]string{"--value-converter", "avro", "--native-payload-message", "shop.Placed"}, reg...),
			"leave them empty with value-converter avro"},
		{append([]string{"--value-converter", "avro", "--expand-json-payload"}, reg...), "native-payload and expand-json-payload"},
		{append([]string{"--value-converter", "protobuf", "--value-subject-name-strategy", "record"}, reg...),
			"leave value-subject-name-strategy topic"},
		{append([]string{"--value-converter", "avro", "--native-payload-framed", "sometimes"}, reg...), "not detect, never or always"},
	} {
		res := run(t, 30*time.Second, env, append([]string{"run"}, tc.args...)...)
		if res.code != 2 || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("run %v: exit %d, want 2 with %q\n%s", tc.args, res.code, tc.want, res.stderr)
		}
	}
}
