package record_test

import (
	"encoding/json"
	"testing"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
)

// The documents of the first cases are those of debezium/debezium's
// debezium-connect-plugins/src/test/java/io/debezium/transforms/outbox/EventRouterTest.java
// (canExpandJsonPayloadIfConfigured, canExpandJsonWithNestedArraysWhereFirstArrayIsEmpty,
// shouldExpandJSONPayloadWithEmptyArrayAndRemoveThatArray); the bytes are what
// JsonConverter (schemas.enable=false) and StringConverter (Struct.toString) write
// for the struct that test asserts. The others follow JsonSchemaData.java beside it.
func TestExpandJSONPayload(t *testing.T) {
	on := record.ExpandJSON{Enabled: true}
	nulls := record.ExpandJSON{Enabled: true, KeepNulls: true}
	empties := record.ExpandJSON{Enabled: true, KeepEmptyArrays: true}
	for _, tc := range []struct {
		name    string
		x       record.ExpandJSON
		payload string
		json    string // value-converter json
		str     string // value-converter string
	}{
		{"router test", on,
			`{"fullName": "John Doe", "enabled": true, "rating": 4.9, "age": 42, "pets": ["dog", "cat"], "petObjects": [{"type": "dog"}, {"type": "cat"}]}`,
			`{"fullName":"John Doe","enabled":true,"rating":4.9,"age":42,"pets":["dog","cat"],"petObjects":[{"type":"dog"},{"type":"cat"}]}`,
			`Struct{fullName=John Doe,enabled=true,rating=4.9,age=42,pets=[dog, cat],petObjects=[Struct{type=dog}, Struct{type=cat}]}`},
		// The first element's empty array is dropped from its schema, the second's
		// gives the union its colors; the first still holds its empty list.
		{"first array empty", on,
			`{"fullName": "John Doe", "petObjects": [{"type": "dog", "colors": []}, {"type": "cat", "colors": [{"name": "white"}]}]}`,
			`{"fullName":"John Doe","petObjects":[{"type":"dog","colors":[]},{"type":"cat","colors":[{"name":"white"}]}]}`,
			`Struct{fullName=John Doe,petObjects=[Struct{type=dog,colors=[]}, Struct{type=cat,colors=[Struct{name=white}]}]}`},
		{"empty array removed", on,
			`{"fullName": "John Doe", "petObjects": [{"type": "dog", "colors": []}]}`,
			`{"fullName":"John Doe","petObjects":[{"type":"dog"}]}`,
			`Struct{fullName=John Doe,petObjects=[Struct{type=dog}]}`},
		{"empty array kept", empties, `{"a": [], "b": 1}`, `{"a":[],"b":1}`, `Struct{a=[],b=1}`},
		// Jackson reads 2.50 as the double 2.5; Double.toString writes it.
		{"nulls dropped, numbers normalised", on, `{"a": null, "b": 2.50, "c": 1e20, "d": 0.0001, "e": 100.0, "f": 5000000000}`,
			`{"b":2.5,"c":1.0E20,"d":1.0E-4,"e":100.0,"f":5000000000}`, `Struct{b=2.5,c=1.0E20,d=1.0E-4,e=100.0,f=5000000000}`},
		{"nulls kept", nulls, `{"a": null, "b": true}`, `{"a":null,"b":true}`, `Struct{b=true}`},
		// Elements' fields are united; a field an element lacks is null.
		{"union", on, `{"l": [{"a": 1}, {"b": "x"}]}`, `{"l":[{"a":1,"b":null},{"a":null,"b":"x"}]}`,
			`Struct{l=[Struct{a=1}, Struct{b=x}]}`},
		{"repeated name", on, `{"a": 1, "b": 2, "a": 3}`, `{"a":3,"b":2}`, `Struct{a=3,b=2}`},
		{"trailing text not read", on, `{"a": 1} tail`, `{"a":1}`, `Struct{a=1}`},
		// What does not expand stays the string it was.
		{"top-level array", on, `[1, 2]`, `"[1, 2]"`, `[1, 2]`},
		{"leading space", on, ` {"a": 1}`, `" {\"a\": 1}"`, ` {"a": 1}`},
		{"not json", on, `{"a": `, `"{\"a\": "`, `{"a": `},
		{"mixed array", on, `{"a": [1, "x"]}`, `"{\"a\": [1, \"x\"]}"`, `{"a": [1, "x"]}`},
		{"int beside long", on, `{"a": [1, 5000000000]}`, `"{\"a\": [1, 5000000000]}"`, `{"a": [1, 5000000000]}`},
		{"first element an empty array", on, `{"a": [[], [1]]}`, `"{\"a\": [[], [1]]}"`, `{"a": [[], [1]]}`},
		{"nested arrays", on, `{"a": [[1], [2, 3]]}`, `{"a":[[1],[2,3]]}`, `Struct{a=[[1], [2, 3]]}`},
		{"only nulls", on, `{"a": [null]}`, `"{\"a\": [null]}"`, `{"a": [null]}`},
		{"field types differ", on, `{"l": [{"a": 1}, {"a": "x"}]}`, `"{\"l\": [{\"a\": 1}, {\"a\": \"x\"}]}"`, `{"l": [{"a": 1}, {"a": "x"}]}`},
		{"beyond long", on, `{"a": 123456789012345678901234}`, `"{\"a\": 123456789012345678901234}"`, `{"a": 123456789012345678901234}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &outbox.Event{ID: "e", AggregateID: "1", Payload: []byte(tc.payload), PayloadType: "jsonb"}
			for _, c := range []struct {
				conv record.Converter
				want string
			}{{record.JSON, tc.json}, {record.String, tc.str}} {
				f := record.Format{ValueConverter: c.conv, ExpandJSON: tc.x}
				if err := f.Validate(); err != nil {
					t.Fatal(err)
				}
				if v, tomb := f.Value(e); string(v) != c.want || tomb {
					t.Errorf("%s: value %s (tombstone %v), want %s", c.conv, v, tomb, c.want)
				}
			}
		})
	}
}

// canExpandJsonPayloadWithAdditionalFieldInEnvelope: the expanded payload is the
// envelope's payload field.
func TestExpandJSONPayloadInEnvelope(t *testing.T) {
	e := &outbox.Event{ID: "e", AggregateID: "1", Payload: []byte(`{"fullName": "John Doe"}`), PayloadType: "jsonb",
		Envelope: []outbox.Field{{Key: "type", Value: "UserCreated"}}}
	for conv, want := range map[record.Converter]string{
		record.JSON:   `{"payload":{"fullName":"John Doe"},"type":"UserCreated"}`,
		record.String: `Struct{payload=Struct{fullName=John Doe},type=UserCreated}`,
	} {
		f := record.Format{ValueConverter: conv, ExpandJSON: record.ExpandJSON{Enabled: true}}
		if v, _ := f.Value(e); string(v) != want {
			t.Errorf("%s: value %s, want %s", conv, v, want)
		}
	}
}

func TestExpandJSONPayloadRefusesBytes(t *testing.T) {
	f := record.Format{ValueConverter: record.ByteArray, ExpandJSON: record.ExpandJSON{Enabled: true}}
	if err := f.Validate(); err == nil {
		t.Errorf("%+v: no error", f)
	}
}

// With schemas the expanded payload's schema is the one JsonSchemaData.
// toConnectSchema infers (debezium-connect-plugins/src/main/java/io/debezium/
// transforms/outbox/JsonSchemaData.java): every schema optional, a struct named
// after its path from the payload column (EventRouterDelegate passes
// table.field.event.payload), an array of objects with the union of their fields
// and the array's path as name, the structs below any other array unnamed at
// first; written by Kafka's JsonConverter.asJsonSchema.
func TestExpandJSONPayloadSchemas(t *testing.T) {
	doc := `{"id": 1, "customer": {"name": "Ann", "vip": true}, "lines": [{"sku": "a", "qty": 2}, {"sku": "b", "price": 2.50}], ` +
		`"tags": ["x"], "big": 3000000000, "none": null, "m": [[{"a": 1}]]}`
	schema := `{"type":"struct","fields":[{"type":"int32","optional":true,"field":"id"},` +
		`{"type":"struct","fields":[{"type":"string","optional":true,"field":"name"},{"type":"boolean","optional":true,"field":"vip"}],` +
		`"optional":true,"name":"event.customer","field":"customer"},` +
		`{"type":"array","items":{"type":"struct","fields":[{"type":"string","optional":true,"field":"sku"},` +
		`{"type":"int32","optional":true,"field":"qty"},{"type":"double","optional":true,"field":"price"}],"optional":true,"name":"event.lines"},` +
		`"optional":true,"field":"lines"},` +
		`{"type":"array","items":{"type":"string","optional":true},"optional":true,"field":"tags"},` +
		`{"type":"int64","optional":true,"field":"big"},` +
		`{"type":"array","items":{"type":"array","items":{"type":"struct","fields":[{"type":"int32","optional":true,"field":"a"}],` +
		`"optional":true},"optional":true},"optional":true,"field":"m"}],"optional":true,"name":"event"}`
	payload := `{"id":1,"customer":{"name":"Ann","vip":true},"lines":[{"sku":"a","qty":2,"price":null},{"sku":"b","qty":null,"price":2.5}],` +
		`"tags":["x"],"big":3000000000,"m":[[{"a":1}]]}`
	f := record.Format{ValueConverter: record.JSON, ValueSchemas: true, ExpandJSON: record.ExpandJSON{Enabled: true, PayloadColumn: "event"}}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	e := &outbox.Event{AggregateID: "1", AggregateType: "Order", Table: "public.outbox", Payload: []byte(doc), PayloadType: "jsonb"}
	want := `{"schema":` + schema + `,"payload":` + payload + `}`
	if v, _ := f.Value(e); string(v) != want {
		t.Errorf("value\n%s\nwant\n%s", v, want)
	}
	// Inside the envelope the inferred schema is the payload field's
	// (EventRouterDelegate.getSchemaBuilder).
	f.TopicPrefix = "dbserver1"
	e.Envelope = []outbox.Field{{Key: "eventType", Value: "OrderCreated"}}
	want = `{"schema":{"type":"struct","fields":[` + schema[:len(schema)-1] + `,"field":"payload"},` +
		`{"type":"string","optional":true,"field":"eventType"}],"optional":false,"name":"dbserver1.public.outbox.Order.Value"},` +
		`"payload":{"payload":` + payload + `,"eventType":"OrderCreated"}}`
	if v, _ := f.Value(e); string(v) != want {
		t.Errorf("envelope value\n%s\nwant\n%s", v, want)
	}
	// What does not expand keeps the column's schema.
	e.Envelope, e.Payload = nil, []byte(`"shipped"`)
	want = `{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"\"shipped\""}`
	if v, _ := f.Value(e); string(v) != want {
		t.Errorf("unexpanded value %s, want %s", v, want)
	}
}

// FuzzExpandJSON: any payload gives a value without a panic, and with the JSON
// converter that value is valid JSON, expanded or the payload as a string.
func FuzzExpandJSON(f *testing.F) {
	for _, s := range []string{`{"a": [{"b": 1}, {"c": [null, 2.5]}], "d": null}`, `{"a": [[], [1]]}`, `{"a": [[1], ["x"]]}`, `[1]`, `{`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		e := &outbox.Event{ID: "e", AggregateID: "1", Payload: []byte(payload), PayloadType: "jsonb"}
		for _, x := range []record.ExpandJSON{{Enabled: true}, {Enabled: true, KeepNulls: true, KeepEmptyArrays: true}} {
			f := record.Format{ValueConverter: record.JSON, ExpandJSON: x}
			if v, _ := f.Value(e); !json.Valid(v) {
				t.Fatalf("%q: value %q is not JSON", payload, v)
			}
			f.ValueSchemas = true
			if v, _ := f.Value(e); !json.Valid(v) {
				t.Fatalf("%q: value with schemas %q is not JSON", payload, v)
			}
			f.ValueSchemas = false
			f.ValueConverter = record.String
			f.Value(e)
		}
	})
}
