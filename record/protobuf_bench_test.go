package record

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/outbox"
)

// BenchmarkProtobuf is what one event's Protobuf key and value cost, beside the
// JSON converter's for the same event (BenchmarkFormat's 200-byte jsonb payload):
// the wrapper path copies the id and the payload behind a tag; expanding parses
// the document and writes it again. "into" appends to a buffer the caller keeps,
// as a sink appends after the magic byte and schema id; "fresh" starts from nil.
func BenchmarkProtobuf(b *testing.B) {
	payload := []byte(`{"id": 1, "item": "` + strings.Repeat("x", 174) + `"}`)
	e := &outbox.Event{ID: "0b5c9b0e-4c55-4a7e-9d1c-2f3f5b1c8e11", AggregateType: "order", AggregateID: "order-42",
		EventType: "order.created", Payload: payload, PayloadType: "jsonb", Table: "public.outbox"}
	env := *e
	env.Envelope = []outbox.Field{{Key: "eventType", Value: e.EventType}}
	expand := ExpandJSON{Enabled: true, PayloadColumn: "payload"}
	for _, bc := range []struct {
		name string
		f    Format
		e    *outbox.Event
	}{
		{"string", Format{}, e},
		{"expand", Format{ExpandJSON: expand}, e},
		{"envelope", Format{TopicPrefix: "dbserver1"}, &env},
		{"envelope-expand", Format{TopicPrefix: "dbserver1", ExpandJSON: expand}, &env},
	} {
		json := bc.f
		json.KeyConverter, json.ValueConverter = JSON, JSON
		b.Run(bc.name+"/json", func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				v, _ := json.Value(bc.e)
				n += len(json.Key(bc.e)) + len(v)
			}
			if n == 0 {
				b.Fatal("no bytes")
			}
		})
		b.Run(bc.name+"/protobuf-into", func(b *testing.B) {
			b.ReportAllocs()
			var key, value []byte
			for b.Loop() {
				key = appendProtobuf(key[:0], &bc.f, false, bc.e)
				value = appendProtobuf(value[:0], &bc.f, true, bc.e)
			}
			if len(key) == 0 || len(value) == 0 {
				b.Fatal("no bytes")
			}
		})
		b.Run(bc.name+"/protobuf-fresh", func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n += len(appendProtobuf(nil, &bc.f, false, bc.e)) + len(appendProtobuf(nil, &bc.f, true, bc.e))
			}
			if n == 0 {
				b.Fatal("no bytes")
			}
		})
	}
}
