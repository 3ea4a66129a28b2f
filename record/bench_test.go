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
			// Two events in turn, so that no converter sees the same payload twice
			// in a row (the registry converters remember the last expansion).
			evs := [2]*outbox.Event{e, other(e)}
			for i := 0; b.Loop(); i++ {
				ev := evs[i&1]
				v, _ := bc.f.Value(ev)
				n += len(bc.f.Key(ev)) + len(v)
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
			evs := [2]*outbox.Event{e, other(e)}
			for i := 0; b.Loop(); i++ {
				var err error
				if dst, err = bc.f.Needs(evs[i&1], dst[:0]); err != nil || len(dst) != 0 {
					b.Fatal(err, dst)
				}
			}
		})
		// What the relay does per event: Needs, then the sink's Key and Value; an
		// expanded payload is parsed once for both.
		b.Run(bc.name+"-then-value", func(b *testing.B) {
			b.ReportAllocs()
			var dst []record.SchemaNeed
			evs := [2]*outbox.Event{e, other(e)}
			n := 0
			for i := 0; b.Loop(); i++ {
				ev := evs[i&1]
				dst, _ = bc.f.Needs(ev, dst[:0])
				v, _ := bc.f.Value(ev)
				n += len(bc.f.Key(ev)) + len(v) + len(dst)
			}
			if n == 0 {
				b.Fatal("no bytes")
			}
		})
	}
}

// other is e with a payload of the same shape and length but other bytes.
func other(e *outbox.Event) *outbox.Event {
	x := *e
	x.Payload = []byte(strings.Replace(string(e.Payload), `"id": 1`, `"id": 2`, 1))
	return &x
}
