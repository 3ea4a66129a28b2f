package record_test

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
)

// BenchmarkFormat is what one event's key and value cost per converter, for a
// 200-byte jsonb payload: the string path views the event's own bytes; JSON quotes
// them into a new value; expanding parses the document and writes it again.
func BenchmarkFormat(b *testing.B) {
	payload := []byte(`{"id": 1, "item": "` + strings.Repeat("x", 174) + `"}`)
	e := &outbox.Event{ID: "0b5c9b0e-4c55-4a7e-9d1c-2f3f5b1c8e11", AggregateType: "order", AggregateID: "order-42",
		EventType: "order.created", Payload: payload, PayloadType: "jsonb"}
	for _, bc := range []struct {
		name string
		f    record.Format
	}{
		{"string", record.Format{}},
		{"json", record.Format{KeyConverter: record.JSON, ValueConverter: record.JSON}},
		{"json-schemas", record.Format{KeyConverter: record.JSON, ValueConverter: record.JSON, KeySchemas: true, ValueSchemas: true}},
		// table.expand.json.payload: the payload parsed, its schema inferred, written again.
		{"json-expand", record.Format{KeyConverter: record.JSON, ValueConverter: record.JSON, ExpandJSON: record.ExpandJSON{Enabled: true}}},
		{"string-expand", record.Format{ExpandJSON: record.ExpandJSON{Enabled: true}}},
		// With schemas the inferred schema is written ahead of the struct.
		{"json-schemas-expand", record.Format{KeyConverter: record.JSON, ValueConverter: record.JSON, KeySchemas: true, ValueSchemas: true,
			ExpandJSON: record.ExpandJSON{Enabled: true, PayloadColumn: "payload"}}},
		// Confluent's Avro converter, ids cached: the schema text is made and looked
		// up per event (record.Schemas), then the binary written after the header.
		{"avro", avroFormat(record.Format{KeyConverter: record.Avro, ValueConverter: record.Avro}, e)},
		{"avro-expand", avroFormat(record.Format{KeyConverter: record.Avro, ValueConverter: record.Avro,
			ExpandJSON: record.ExpandJSON{Enabled: true, PayloadColumn: "payload"}}, e)},
		{"json-schema", avroFormat(record.Format{KeyConverter: record.JSONSchema, ValueConverter: record.JSONSchema}, e)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				v, _ := bc.f.Value(e)
				n += len(bc.f.Key(e)) + len(v)
			}
			if n == 0 {
				b.Fatal("no bytes")
			}
		})
	}
}

// avroFormat is f with every id e needs cached, as the relay leaves it before
// publishing.
func avroFormat(f record.Format, e *outbox.Event) record.Format {
	f.Schemas = &record.Schemas{Topic: func(*outbox.Event) string { return "outbox.event.order" }}
	needs, _ := f.Needs(e, nil)
	for i, n := range needs {
		f.Schemas.Store(n.Subject, n.Schema, int32(i+1))
	}
	return f
}

// BenchmarkNeeds is the relay's check, before each event is published, that its
// ids are cached (record.Format.Needs): the schema text made and looked up.
func BenchmarkNeeds(b *testing.B) {
	payload := []byte(`{"id": 1, "item": "` + strings.Repeat("x", 174) + `"}`)
	e := &outbox.Event{ID: "0b5c9b0e-4c55-4a7e-9d1c-2f3f5b1c8e11", AggregateType: "order", AggregateID: "order-42",
		EventType: "order.created", Payload: payload, PayloadType: "jsonb"}
	for _, bc := range []struct {
		name string
		f    record.Format
	}{
		{"avro", avroFormat(record.Format{KeyConverter: record.Avro, ValueConverter: record.Avro}, e)},
		{"avro-expand", avroFormat(record.Format{KeyConverter: record.Avro, ValueConverter: record.Avro,
			ExpandJSON: record.ExpandJSON{Enabled: true, PayloadColumn: "payload"}}, e)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var dst []record.SchemaNeed
			for b.Loop() {
				var err error
				if dst, err = bc.f.Needs(e, dst[:0]); err != nil || len(dst) != 0 {
					b.Fatal(err, dst)
				}
			}
		})
	}
}
