package record_test

import (
	"slices"
	"testing"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
)

// The JSON Schema text Confluent's JsonSchemaConverter registers is
// JsonSchemaData.fromConnectSchema's everit schema, printed by everit's
// ToStringVisitor, read into a Jackson tree and written by
// JsonSchema.canonicalString: per schema its type (or, for an optional one, the
// oneOf after its connect.index), title, connect.* properties, then properties,
// which come in java.util.HashMap's order (everit's ObjectSchema.Builder keeps
// them in one). The property orders below are what a JDK's HashMap iterates
// after putting the names in field order; walrelay's texts must equal these byte
// for byte, so that the registry finds the id Debezium's connector registered
// (it compares JSON Schema texts, not documents, unless normalize is set).

// The envelope struct: payload (index 0) and the router's envelope fields; a JDK
// HashMap of tenant_id, trace, payload and region in field order iterates
// tenant_id, trace, payload, region.
func TestJSONSchemaTextEnvelope(t *testing.T) {
	e := &outbox.Event{ID: "1", AggregateType: "order", AggregateID: "7", PayloadType: "jsonb", Payload: []byte(`{"a":1}`),
		Envelope: []outbox.Field{{Key: "tenant_id", Value: "t"}, {Key: "trace", Null: true}, {Key: "region", Value: "eu"}}}
	f := registered(t, record.Format{ValueConverter: record.JSONSchema, TopicPrefix: "shop"}, e)
	want := `{"type":"object","title":"shop.order.Value","properties":{` +
		`"tenant_id":{"connect.index":1,"oneOf":[{"type":"null"},{"type":"string"}]},` +
		`"trace":{"connect.index":2,"oneOf":[{"type":"null"},{"type":"string"}]},` +
		`"payload":{"connect.index":0,"oneOf":[{"type":"null"},{"type":"string","title":"io.debezium.data.Json","connect.version":1}]},` +
		`"region":{"connect.index":3,"oneOf":[{"type":"null"},{"type":"string"}]}}}`
	if n := need(t, f, e, true); n.Schema != want {
		t.Errorf("schema\n%s\nwant\n%s", n.Schema, want)
	}
}

// The expanded payload: every field optional, so its connect.index is on the
// oneOf; nested structs titled by their path. A JDK HashMap of id, customer,
// tags, total and ok iterates total, id, ok, customer, tags; of name and city,
// city, name.
func TestJSONSchemaTextExpanded(t *testing.T) {
	e := &outbox.Event{ID: "1", AggregateType: "order", AggregateID: "7", PayloadType: "jsonb",
		Payload: []byte(`{"id":1,"customer":{"name":"x","city":"y"},"tags":["a"],"total":2.5,"ok":true}`)}
	f := registered(t, record.Format{ValueConverter: record.JSONSchema,
		ExpandJSON: record.ExpandJSON{Enabled: true, PayloadColumn: "payload"}}, e)
	want := `{"oneOf":[{"type":"null"},{"type":"object","title":"payload","properties":{` +
		`"total":{"connect.index":3,"oneOf":[{"type":"null"},{"type":"number","connect.type":"float64"}]},` +
		`"id":{"connect.index":0,"oneOf":[{"type":"null"},{"type":"integer","connect.type":"int32"}]},` +
		`"ok":{"connect.index":4,"oneOf":[{"type":"null"},{"type":"boolean"}]},` +
		`"customer":{"connect.index":1,"oneOf":[{"type":"null"},{"type":"object","title":"payload.customer","properties":{` +
		`"city":{"connect.index":1,"oneOf":[{"type":"null"},{"type":"string"}]},` +
		`"name":{"connect.index":0,"oneOf":[{"type":"null"},{"type":"string"}]}}}]},` +
		`"tags":{"connect.index":2,"oneOf":[{"type":"null"},{"type":"array","items":{"oneOf":[{"type":"null"},{"type":"string"}]}}]}}}]}`
	if n := need(t, f, e, true); n.Schema != want {
		t.Errorf("schema\n%s\nwant\n%s", n.Schema, want)
	}
}

// An empty object has no properties key: ToStringVisitor writes it only for a
// non-empty map.
func TestJSONSchemaTextEmptyObject(t *testing.T) {
	e := &outbox.Event{ID: "1", AggregateType: "order", AggregateID: "7", PayloadType: "jsonb", Payload: []byte(`{"meta":{},"n":"x"}`)}
	f := registered(t, record.Format{ValueConverter: record.JSONSchema,
		ExpandJSON: record.ExpandJSON{Enabled: true, PayloadColumn: "payload"}}, e)
	want := `{"oneOf":[{"type":"null"},{"type":"object","title":"payload","properties":{` +
		`"meta":{"connect.index":0,"oneOf":[{"type":"null"},{"type":"object","title":"payload.meta"}]},` +
		`"n":{"connect.index":1,"oneOf":[{"type":"null"},{"type":"string"}]}}}]}`
	if n := need(t, f, e, true); n.Schema != want {
		t.Errorf("schema\n%s\nwant\n%s", n.Schema, want)
	}
}

// javaHashOrder against what a JDK's HashMap iterates (printed by a JDK 17 program
// putting the keys in this order): 14 keys grow the table to 32 buckets; "BB"
// and "Aa" share a hash and keep their insertion order.
func TestJavaHashOrder(t *testing.T) {
	for _, c := range [][2][]string{
		{{"c", "b", "a"}, {"a", "b", "c"}},
		{{"BB", "Aa"}, {"BB", "Aa"}},
		{{"id", "customer", "tags", "total", "ok"}, {"total", "id", "ok", "customer", "tags"}},
		{{"f01", "f02", "f03", "f04", "f05", "f06", "f07", "f08", "f09", "f10", "f11", "f12", "f13", "f14"},
			{"f10", "f01", "f12", "f11", "f03", "f14", "f02", "f13", "f05", "f04", "f07", "f06", "f09", "f08"}},
	} {
		var got []string
		for _, i := range record.JavaHashOrder(c[0]) {
			got = append(got, c[0][i])
		}
		if !slices.Equal(got, c[1]) {
			t.Errorf("%v: %v, want %v", c[0], got, c[1])
		}
	}
}
