package record_test

import (
	"testing"
	"time"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
)

// document is the payload of the outbox router's documentation example
// (debezium/debezium documentation/modules/ROOT/pages/transformations/
// outbox-event-router.adoc, "Example outbox message"), and quoted its value there.
const (
	document = `{"id": 1, "lineItems": [{"id": 1, "item": "Debezium in Action", "status": "ENTERED", "quantity": 2, "totalPrice": 39.98}], "customerId": 123}`
	quoted   = `"{\"id\": 1, \"lineItems\": [{\"id\": 1, \"item\": \"Debezium in Action\", \"status\": \"ENTERED\", \"quantity\": 2, \"totalPrice\": 39.98}], \"customerId\": 123}"`
)

func TestKeyAndValue(t *testing.T) {
	ev := func(payload string, typ string) *outbox.Event {
		return &outbox.Event{ID: "4d47e190-0402-4048-bc2c-89dd54343cdc", AggregateType: "Order", AggregateID: "1",
			EventType: "OrderCreated", Payload: []byte(payload), PayloadType: typ}
	}
	null := &outbox.Event{ID: "e", AggregateID: "1", NullPayload: true, PayloadType: "jsonb"}
	jsonNoSchemas := record.Format{KeyConverter: record.JSON, ValueConverter: record.JSON}
	jsonSchemas := record.Format{KeyConverter: record.JSON, ValueConverter: record.JSON, KeySchemas: true, ValueSchemas: true}
	for _, tc := range []struct {
		name      string
		f         record.Format
		e         *outbox.Event
		key       string
		value     string
		tombstone bool
	}{
		// walrelay's own record: StringConverter writes the text as it is
		// (kafka connect/api StringConverter.fromConnectData: value.toString() in UTF-8).
		{"string", record.Format{}, ev(document, "jsonb"), "1", document, false},
		{"string null", record.Format{}, null, "1", "", true},
		{"string empty", record.Format{}, ev("", "text"), "1", "", false},
		// outbox-event-router.adoc, "Example outbox message": key "1", the payload a JSON string.
		{"json", jsonNoSchemas, ev(document, "jsonb"), `"1"`, quoted, false},
		// JsonConverter.convertToJson: a null of an optional schema is a NullNode,
		// written as null; only a null without a schema is a null value.
		{"json null", jsonNoSchemas, null, `"1"`, "null", false},
		// JsonConverter.convertToJsonWithEnvelope and asJsonSchema (type, optional,
		// name, version); the schema of a jsonb column is io.debezium.data.Json
		// version 1 (PostgresValueConverter, SchemaFactory.datatypeJsonSchema).
		{"json schemas", jsonSchemas, ev(document, "jsonb"),
			`{"schema":{"type":"string","optional":false},"payload":"1"}`,
			`{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":` + quoted + `}`, false},
		{"json schemas text", jsonSchemas, ev("plain", "text"),
			`{"schema":{"type":"string","optional":false},"payload":"1"}`,
			`{"schema":{"type":"string","optional":true},"payload":"plain"}`, false},
		{"json schemas null", jsonSchemas, null,
			`{"schema":{"type":"string","optional":false},"payload":"1"}`,
			`{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":null}`, false},
		// JsonConverter writes bytes as Jackson's binary node: base64 with padding.
		{"json bytea", jsonNoSchemas, ev("\x00\x01\xfe", "bytea"), `"1"`, `"AAH+"`, false},
		{"json schemas bytea", jsonSchemas, ev("\x00\x01\xfe", "bytea"),
			`{"schema":{"type":"string","optional":false},"payload":"1"}`,
			`{"schema":{"type":"bytes","optional":true},"payload":"AAH+"}`, false},
		// Jackson's escapes: quote, backslash, \b \t \n \f \r by name, other control
		// characters as \u00XX; non-ASCII and / as they are.
		{"json escapes", jsonNoSchemas, ev("a\"b\\c\n\t\x01\x7f/é€", "text"), `"1"`, `"a\"b\\c\n\t\u0001` + "\x7f/é€" + `"`, false},
		{"bytearray", record.Format{KeyConverter: record.ByteArray, ValueConverter: record.ByteArray}, ev("\x00\x01", "bytea"), "1", "\x00\x01", false},
		// EventRouterDelegate: isDeleteEvent = payload == null ||
		// payload.toString().trim().isEmpty(); with route.tombstone.on.empty.payload a null value.
		{"tombstone on empty", record.Format{ValueConverter: record.JSON, TombstoneOnEmpty: true}, ev("", "text"), "1", "", true},
		{"tombstone on blank", record.Format{TombstoneOnEmpty: true}, ev(" \t\n", "text"), "1", "", true},
		{"tombstone on null", record.Format{ValueConverter: record.JSON, TombstoneOnEmpty: true}, null, "1", "", true},
		{"not blank", record.Format{TombstoneOnEmpty: true}, ev(" x ", "text"), "1", " x ", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.f.Validate(); err != nil {
				t.Fatal(err)
			}
			if got := string(tc.f.Key(tc.e)); got != tc.key {
				t.Errorf("key %s, want %s", got, tc.key)
			}
			v, tomb := tc.f.Value(tc.e)
			if tomb != tc.tombstone || (tomb && v != nil) {
				t.Fatalf("tombstone %v (value %q), want %v", tomb, v, tc.tombstone)
			}
			if !tomb && string(v) != tc.value {
				t.Errorf("value %s, want %s", v, tc.value)
			}
		})
	}
}

func TestTimestamp(t *testing.T) {
	created := time.Date(2019, 5, 3, 13, 31, 34, 484000000, time.UTC) // 1556890294484, the documentation's
	now := created.Add(time.Hour)
	e := &outbox.Event{CreatedAt: created}
	if got := (&record.Format{}).Timestamp(e, now); !got.Equal(now) {
		t.Errorf("default timestamp %v, want the time of publishing %v", got, now)
	}
	if got := (&record.Format{EventTimestamp: true}).Timestamp(e, now); !got.Equal(created) {
		t.Errorf("event timestamp %v, want %v", got, created)
	}
}

func TestValidate(t *testing.T) {
	if err := (record.Format{KeySchemas: true}).Validate(); err == nil {
		t.Error("schemas with the string converter accepted")
	}
	if _, err := record.ParseConverter("thrift"); err == nil {
		t.Error("thrift accepted")
	}
}

// The router's value with envelope fields: a struct of payload and the fields
// (EventRouterDelegate: structValue.put(ENVELOPE_PAYLOAD, payload) then each
// additional field's alias). JsonConverter writes it as an object in field order
// with NULL as null; StringConverter writes Kafka's Struct.toString
// (connect/api Struct.java: Struct{name=value,...}, NULL fields left out).
func TestEnvelope(t *testing.T) {
	e := &outbox.Event{AggregateID: "1", Payload: []byte(`{"n": 1}`), PayloadType: "jsonb",
		Envelope: []outbox.Field{{Key: "eventType", Value: "OrderCreated"}, {Key: "audit", Null: true}}}
	null := &outbox.Event{AggregateID: "1", NullPayload: true, PayloadType: "jsonb",
		Envelope: []outbox.Field{{Key: "eventType", Value: "OrderDeleted"}}}
	e.AggregateType, null.AggregateType, e.Table, null.Table = "Order", "Order", "public.outbox", "public.outbox"
	schemas := record.Format{ValueConverter: record.JSON, ValueSchemas: true, TopicPrefix: "dbserver1"}
	text := &outbox.Event{AggregateID: "1", AggregateType: "Shipment", Table: "app.events", Payload: []byte("plain"), PayloadType: "text",
		Envelope: []outbox.Field{{Key: "eventType", Value: "OrderCreated"}}}
	for _, tc := range []struct {
		name      string
		f         record.Format
		e         *outbox.Event
		value     string
		tombstone bool
	}{
		{"json", record.Format{ValueConverter: record.JSON}, e, `{"payload":"{\"n\": 1}","eventType":"OrderCreated","audit":null}`, false},
		{"json null payload", record.Format{ValueConverter: record.JSON}, null, `{"payload":null,"eventType":"OrderDeleted"}`, false},
		{"string", record.Format{}, e, `Struct{payload={"n": 1},eventType=OrderCreated}`, false},
		// A struct is not null: without the tombstone option a NULL payload is not a tombstone.
		{"string null payload", record.Format{}, null, `Struct{eventType=OrderDeleted}`, false},
		{"tombstone", record.Format{TombstoneOnEmpty: true}, null, "", true},
		// With schemas the struct's schema is EventRouterDelegate.getSchemaBuilder's
		// (debezium-connect-plugins/src/main/java/io/debezium/transforms/outbox/
		// EventRouterDelegate.java): the payload with its column's schema, then each
		// envelope field, named by getSchemaName after the change event's value schema
		// (topic.prefix.schema.table.Value) with the route-by value (Order) before
		// its last part; written by Kafka's
		// JsonConverter.asJsonSchema (type, fields, optional, name; a field's name last).
		{"json schemas", schemas, e, `{"schema":{"type":"struct","fields":[` +
			`{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"payload"},` +
			`{"type":"string","optional":true,"field":"eventType"},{"type":"string","optional":true,"field":"audit"}],` +
			`"optional":false,"name":"dbserver1.public.outbox.Order.Value"},` +
			`"payload":{"payload":"{\"n\": 1}","eventType":"OrderCreated","audit":null}}`, false},
		{"json schemas null payload", schemas, null, `{"schema":{"type":"struct","fields":[` +
			`{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"payload"},` +
			`{"type":"string","optional":true,"field":"eventType"}],` +
			`"optional":false,"name":"dbserver1.public.outbox.Order.Value"},` +
			`"payload":{"payload":null,"eventType":"OrderDeleted"}}`, false},
		{"json schemas text", schemas, text, `{"schema":{"type":"struct","fields":[` +
			`{"type":"string","optional":true,"field":"payload"},{"type":"string","optional":true,"field":"eventType"}],` +
			`"optional":false,"name":"dbserver1.app.events.Shipment.Value"},"payload":{"payload":"plain","eventType":"OrderCreated"}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, tomb := tc.f.Value(tc.e)
			if tomb != tc.tombstone || (!tomb && string(v) != tc.value) {
				t.Errorf("value %s (tombstone %v), want %s (tombstone %v)", v, tomb, tc.value, tc.tombstone)
			}
		})
	}
}
