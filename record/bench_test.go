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
