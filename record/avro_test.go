package record_test

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
)

// registered gives every schema an id as a registry would, and returns the Format
// with its cache filled for e, so that Key and Value write the ids.
func registered(t *testing.T, f record.Format, events ...*outbox.Event) record.Format {
	t.Helper()
	if f.Schemas == nil {
		f.Schemas = &record.Schemas{Topic: func(e *outbox.Event) string { return "outbox." + e.AggregateType }}
	}
	for _, e := range events {
		needs, err := f.Needs(e, nil)
		if err != nil {
			t.Fatalf("Needs: %v", err)
		}
		for _, n := range needs {
			f.Schemas.Store(n.Subject, n.Schema, int32(len(n.Schema))) // any id; checked below
		}
		if again, _ := f.Needs(e, nil); len(again) != 0 {
			t.Fatalf("still needed after caching: %+v", again)
		}
	}
	return f
}

// decodeFramed checks Confluent's header (magic 0, 4-byte big-endian id) and
// decodes the Avro binary after it with hamba/avro, an encoder of its own, against
// the schema text walrelay registers.
func decodeFramed(t *testing.T, schemaText string, b []byte) any {
	t.Helper()
	if len(b) < 5 || b[0] != 0 {
		t.Fatalf("no wire format header: % x", b)
	}
	if id := binary.BigEndian.Uint32(b[1:5]); id != uint32(len(schemaText)) {
		t.Fatalf("schema id %d, want the one cached for the schema (%d)", id, len(schemaText))
	}
	s, err := avro.ParseWithCache(schemaText, "", &avro.SchemaCache{})
	if err != nil {
		t.Fatalf("schema does not parse: %v\n%s", err, schemaText)
	}
	var v any
	if err := avro.Unmarshal(s, b[5:], &v); err != nil {
		t.Fatalf("decode: %v (% x)", err, b[5:])
	}
	return v
}

func need(t *testing.T, f record.Format, e *outbox.Event, value bool) record.SchemaNeed {
	t.Helper()
	f.Schemas = &record.Schemas{KeyStrategy: f.Schemas.KeyStrategy, ValueStrategy: f.Schemas.ValueStrategy, Topic: f.Schemas.Topic}
	needs, err := f.Needs(e, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range needs {
		if n.Value == value {
			return n
		}
	}
	t.Fatalf("no %v need in %+v", value, needs)
	return record.SchemaNeed{}
}

// The payload column's schema as Debezium's connector gives it (an optional
// string, io.debezium.data.Json version 1 for json and jsonb, optional bytes for
// bytea), through AvroData.fromConnectSchema: an optional schema is the union
// ["null", …] (maybeMakeOptional, no default), a named one carries connect.version
// then connect.name (the order AvroData adds them). The key is the aggregate id, a
// required string. Each value decodes to the payload.
func TestAvroPayloadShapes(t *testing.T) {
	for _, tc := range []struct {
		name, typ, schema string
		payload           []byte
		want              any
	}{
		{"text", "text", `["null","string"]`, []byte("hello, wörld"), "hello, wörld"},
		{"jsonb", "jsonb", `["null",{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Json"}]`,
			[]byte(`{"a": 1}`), `{"a": 1}`},
		{"bytea", "bytea", `["null","bytes"]`, []byte{0, 1, 0xff}, []byte{0, 1, 0xff}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &outbox.Event{ID: "1", AggregateType: "order", AggregateID: "order-7", Payload: tc.payload, PayloadType: tc.typ}
			f := registered(t, record.Format{KeyConverter: record.Avro, ValueConverter: record.Avro}, e)
			vn := need(t, f, e, true)
			if vn.Schema != tc.schema || vn.Subject != "outbox.order-value" || vn.Type != record.SchemaAvro {
				t.Errorf("value need %+v, want schema %s under outbox.order-value (TopicNameStrategy)", vn, tc.schema)
			}
			kn := need(t, f, e, false)
			if kn.Schema != `"string"` || kn.Subject != "outbox.order-key" {
				t.Errorf("key need %+v", kn)
			}
			v, tomb := f.Value(e)
			if tomb {
				t.Fatal("tombstone")
			}
			if got := decodeFramed(t, tc.schema, v); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("value decodes to %#v, want %#v", got, tc.want)
			}
			if got := decodeFramed(t, `"string"`, f.Key(e)); got != "order-7" {
				t.Errorf("key decodes to %#v", got)
			}
			if f.Schemas.Misses() != 0 {
				t.Errorf("%d ids written without being cached", f.Schemas.Misses())
			}
		})
	}
}

// A NULL payload is a null value, which Confluent's serializers write as null: a
// tombstone, needing no schema.
func TestAvroNullPayloadIsTombstone(t *testing.T) {
	e := &outbox.Event{ID: "1", AggregateType: "order", AggregateID: "7", NullPayload: true, PayloadType: "jsonb"}
	f := registered(t, record.Format{KeyConverter: record.Avro, ValueConverter: record.Avro}, e)
	if v, tomb := f.Value(e); !tomb || v != nil {
		t.Errorf("value %q tombstone %v, want a tombstone", v, tomb)
	}
	needs, _ := (&record.Format{ValueConverter: record.Avro, Schemas: &record.Schemas{Topic: func(*outbox.Event) string { return "t" }}}).Needs(e, nil)
	if len(needs) != 0 {
		t.Errorf("a tombstone needs %+v", needs)
	}
}

// An expanded payload (table.expand.json.payload) is the optional struct
// JsonSchemaData.toConnectSchema infers, named after its path from the payload
// column (record/expandschema.go). AvroData makes each struct a record named
// after the Connect name split at its last dot (splitName), with connect.name; a
// record nested in one of another namespace writes its namespace; every field is
// optional, so a union with null and "default":null (addAvroRecordField); arrays'
// items are optional too.
func TestAvroExpandedPayload(t *testing.T) {
	e := &outbox.Event{ID: "1", AggregateType: "order", AggregateID: "7", PayloadType: "jsonb",
		Payload: []byte(`{"id": 42, "big": 5000000000, "price": 9.5, "ok": true, "name": "x", "gone": null,` +
			`"customer": {"first": "Ann"}, "tags": ["a", "b"], "lines": [{"sku": "s1"}, {"sku": "s2", "qty": 2}]}`)}
	f := registered(t, record.Format{ValueConverter: record.Avro, ExpandJSON: record.ExpandJSON{Enabled: true, PayloadColumn: "payload"}}, e)
	want := `["null",{"type":"record","name":"payload","fields":[` +
		`{"name":"id","type":["null","int"],"default":null},` +
		`{"name":"big","type":["null","long"],"default":null},` +
		`{"name":"price","type":["null","double"],"default":null},` +
		`{"name":"ok","type":["null","boolean"],"default":null},` +
		`{"name":"name","type":["null","string"],"default":null},` +
		`{"name":"customer","type":["null",{"type":"record","name":"customer","namespace":"payload","fields":[` +
		`{"name":"first","type":["null","string"],"default":null}],"connect.name":"payload.customer"}],"default":null},` +
		`{"name":"tags","type":["null",{"type":"array","items":["null","string"]}],"default":null},` +
		`{"name":"lines","type":["null",{"type":"array","items":["null",{"type":"record","name":"lines","namespace":"payload","fields":[` +
		`{"name":"sku","type":["null","string"],"default":null},{"name":"qty","type":["null","int"],"default":null}],` +
		`"connect.name":"payload.lines"}]}],"default":null}` +
		`],"connect.name":"payload"}]`
	if n := need(t, f, e, true); n.Schema != want {
		t.Fatalf("schema\n%s\nwant\n%s", n.Schema, want)
	}
	v, _ := f.Value(e)
	got := decodeFramed(t, want, v)
	// hamba/avro decodes a union's non-null branch of a named or complex type
	// as {type name: value}, as Avro's JSON encoding writes unions.
	exp := map[string]any{"payload": map[string]any{"id": 42, "big": int64(5000000000), "price": 9.5, "ok": true, "name": "x",
		"customer": map[string]any{"payload.customer": map[string]any{"first": "Ann"}}, "tags": map[string]any{"array": []any{"a", "b"}},
		"lines": map[string]any{"array": []any{map[string]any{"payload.lines": map[string]any{"sku": "s1", "qty": nil}},
			map[string]any{"payload.lines": map[string]any{"sku": "s2", "qty": 2}}}}}}
	if !reflect.DeepEqual(got, exp) {
		t.Errorf("decoded %#v\nwant %#v", got, exp)
	}
}

// Envelope fields make the value the router's required struct named
// topic.prefix.schema.table.<aggregate>.Value (EventRouterDelegate.getSchemaName):
// a record Value in namespace dbserver1.public.outbox.order, its payload field
// first, then each envelope field as an optional string. An expanded payload in
// it is a record of no namespace inside one that has one: Avro writes
// "namespace":"" for it.
func TestAvroEnvelope(t *testing.T) {
	e := &outbox.Event{ID: "1", AggregateType: "order", AggregateID: "7", PayloadType: "text", Table: "public.outbox",
		Payload: []byte("hi"), Envelope: []outbox.Field{{Key: "eventType", Value: "Created"}, {Key: "audit", Null: true}}}
	f := registered(t, record.Format{ValueConverter: record.Avro, TopicPrefix: "dbserver1"}, e)
	want := `{"type":"record","name":"Value","namespace":"dbserver1.public.outbox.order","fields":[` +
		`{"name":"payload","type":["null","string"],"default":null},` +
		`{"name":"eventType","type":["null","string"],"default":null},` +
		`{"name":"audit","type":["null","string"],"default":null}],"connect.name":"dbserver1.public.outbox.order.Value"}`
	if n := need(t, f, e, true); n.Schema != want {
		t.Fatalf("schema\n%s\nwant\n%s", n.Schema, want)
	}
	v, _ := f.Value(e)
	if got, exp := decodeFramed(t, want, v), map[string]any{"payload": "hi", "eventType": "Created", "audit": nil}; !reflect.DeepEqual(got, exp) {
		t.Errorf("decoded %#v, want %#v", got, exp)
	}

	x := *e
	x.PayloadType, x.Payload = "jsonb", []byte(`{"n": 1}`)
	fx := registered(t, record.Format{ValueConverter: record.Avro, TopicPrefix: "dbserver1",
		ExpandJSON: record.ExpandJSON{Enabled: true, PayloadColumn: "payload"}}, &x)
	wantX := `{"type":"record","name":"Value","namespace":"dbserver1.public.outbox.order","fields":[` +
		`{"name":"payload","type":["null",{"type":"record","name":"payload","namespace":"","fields":[` +
		`{"name":"n","type":["null","int"],"default":null}],"connect.name":"payload"}],"default":null},` +
		`{"name":"eventType","type":["null","string"],"default":null},` +
		`{"name":"audit","type":["null","string"],"default":null}],"connect.name":"dbserver1.public.outbox.order.Value"}`
	if n := need(t, fx, &x, true); n.Schema != wantX {
		t.Fatalf("schema\n%s\nwant\n%s", n.Schema, wantX)
	}
	v, _ = fx.Value(&x)
	// hamba/avro reads "namespace":"" as the enclosing namespace, where Java's
	// Avro reads the null namespace; the bytes are the same either way.
	if got, exp := decodeFramed(t, wantX, v), map[string]any{"payload": map[string]any{"dbserver1.public.outbox.order.payload": map[string]any{"n": 1}},
		"eventType": "Created", "audit": nil}; !reflect.DeepEqual(got, exp) {
		t.Errorf("decoded %#v, want %#v", got, exp)
	}
}

// RecordNameStrategy names the subject after the record's full name and
// TopicRecordNameStrategy after topic-fullname (RecordNameStrategy.getRecordName,
// TopicRecordNameStrategy.subjectName); a schema with no record (AvroSchema.name()
// is null for a union) cannot be named so.
func TestSubjectStrategies(t *testing.T) {
	topic := func(*outbox.Event) string { return "t" }
	env := &outbox.Event{ID: "1", AggregateType: "order", AggregateID: "7", Payload: []byte("x"), Table: "public.outbox",
		Envelope: []outbox.Field{{Key: "type", Value: "A"}}}
	for st, want := range map[record.SubjectStrategy]string{record.TopicName: "t-value", record.RecordName: "p.public.outbox.order.Value",
		record.TopicRecordName: "t-p.public.outbox.order.Value"} {
		f := record.Format{ValueConverter: record.Avro, TopicPrefix: "p", Schemas: &record.Schemas{ValueStrategy: st, Topic: topic}}
		needs, err := f.Needs(env, nil)
		if err != nil || len(needs) != 1 || needs[0].Subject != want {
			t.Errorf("%s: %+v %v, want subject %s", st, needs, err, want)
		}
	}
	plain := &outbox.Event{ID: "1", AggregateType: "order", AggregateID: "7", Payload: []byte("x")}
	f := record.Format{ValueConverter: record.Avro, Schemas: &record.Schemas{ValueStrategy: record.RecordName, Topic: topic}}
	var unwritable *record.UnwritableError
	if _, err := f.Needs(plain, nil); !errors.As(err, &unwritable) {
		t.Errorf("record strategy for a payload with no record name: %v, want an UnwritableError", err)
	}
}

// A field name Avro refuses (Schema.validateName) fails Confluent's converter;
// walrelay makes the event a dead letter rather than write a record nobody reads.
func TestAvroInvalidName(t *testing.T) {
	e := &outbox.Event{ID: "1", AggregateType: "order", AggregateID: "7", PayloadType: "jsonb", Payload: []byte(`{"first-name": "a"}`)}
	f := record.Format{ValueConverter: record.Avro, ExpandJSON: record.ExpandJSON{Enabled: true, PayloadColumn: "payload"},
		Schemas: &record.Schemas{Topic: func(*outbox.Event) string { return "t" }}}
	var unwritable *record.UnwritableError
	if _, err := f.Needs(e, nil); !errors.As(err, &unwritable) {
		t.Errorf("Needs: %v, want an UnwritableError", err)
	}
}

// A value written before its id was cached gets id 0, which no registry gives,
// and is counted.
func TestAvroMissIsCounted(t *testing.T) {
	f := record.Format{ValueConverter: record.Avro, Schemas: &record.Schemas{Topic: func(*outbox.Event) string { return "t" }}}
	v, _ := f.Value(&outbox.Event{ID: "1", AggregateID: "7", Payload: []byte("x")})
	if binary.BigEndian.Uint32(v[1:5]) != 0 || f.Schemas.Misses() != 1 {
		t.Errorf("value % x, misses %d", v, f.Schemas.Misses())
	}
}

// JsonSchemaConverter writes, after the header, the JSON of the Connect value:
// the JSON converter's without its envelope (JsonSchemaData.fromConnectData). The
// schema is JSON: an optional string a oneOf with null.
func TestJSONSchemaConverter(t *testing.T) {
	e := &outbox.Event{ID: "1", AggregateType: "order", AggregateID: "7", PayloadType: "jsonb", Payload: []byte(`{"a": "b"}`)}
	f := registered(t, record.Format{KeyConverter: record.JSONSchema, ValueConverter: record.JSONSchema}, e)
	n := need(t, f, e, true)
	if n.Type != record.SchemaJSONSchema ||
		n.Schema != `{"oneOf":[{"type":"null"},{"type":"string","title":"io.debezium.data.Json","connect.version":1}]}` {
		t.Errorf("need %+v", n)
	}
	v, _ := f.Value(e)
	if string(v[5:]) != `"{\"a\": \"b\"}"` {
		t.Errorf("value %q", v[5:])
	}
	if k := f.Key(e); string(k[5:]) != `"7"` {
		t.Errorf("key %q", k[5:])
	}
}

// Protobuf plugs into the same framework: its schema registers as PROTOBUF under
// the topic's subject, and the value is the header then what appendProtobuf
// writes (the message indexes and the message, record/protobuf.go).
func TestProtobufThroughTheRegistryFramework(t *testing.T) {
	e := &outbox.Event{ID: "1", AggregateType: "order", AggregateID: "7", Payload: []byte("hi"), PayloadType: "text"}
	f := registered(t, record.Format{KeyConverter: record.Protobuf, ValueConverter: record.Protobuf}, e)
	n := need(t, f, e, true)
	if n.Type != record.SchemaProtobuf || n.Subject != "outbox.order-value" || !strings.Contains(n.Schema, "StringValue") {
		t.Fatalf("need %+v", n)
	}
	v, _ := f.Value(e)
	if v[0] != 0 || binary.BigEndian.Uint32(v[1:5]) != uint32(len(n.Schema)) {
		t.Fatalf("header % x", v[:5])
	}
	// The message indexes: one index (zig-zag 2), StringValue's 7 in
	// wrappers.proto (zig-zag 14); then field 1 (tag 0x0a) with the text.
	if want := "\x02\x0e\x0a\x02hi"; string(v[5:]) != want {
		t.Errorf("after the header % x, want % x", v[5:], want)
	}
	if f.Schemas.Misses() != 0 {
		t.Errorf("%d misses", f.Schemas.Misses())
	}
}

// The last expansion is remembered between Needs and Value (the relay calls them
// in turn on the same event); another payload, even of the same length, is
// expanded anew, never taken for the remembered one.
func TestAvroRemembersOnlyTheSamePayload(t *testing.T) {
	a := &outbox.Event{ID: "1", AggregateType: "order", AggregateID: "7", PayloadType: "jsonb", Payload: []byte(`{"n": 1}`)}
	b := &outbox.Event{ID: "2", AggregateType: "order", AggregateID: "7", PayloadType: "jsonb", Payload: []byte(`{"m": 2}`)}
	f := registered(t, record.Format{ValueConverter: record.Avro, ExpandJSON: record.ExpandJSON{Enabled: true, PayloadColumn: "payload"}}, a, b)
	for _, order := range [][2]*outbox.Event{{a, b}, {b, a}, {a, a}} {
		if _, err := f.Needs(order[0], nil); err != nil {
			t.Fatal(err)
		}
		e := order[1]
		v, _ := f.Value(e)
		text := need(t, f, e, true).Schema
		got := decodeFramed(t, text, v)
		want := map[string]any{"payload": map[string]any{"n": 1}}
		if e == b {
			want = map[string]any{"payload": map[string]any{"m": 2}}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("after Needs(%s), Value(%s) decodes to %v, want %v", order[0].ID, e.ID, got, want)
		}
	}
}
