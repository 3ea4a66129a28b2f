package record_test

import (
	"testing"

	"github.com/hamba/avro/v2"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
)

// FuzzAvroValue writes any payload with the Avro converter, expanded and not, bare
// and in an envelope: nothing panics, and whatever is written decodes with the
// schema registered for it (hamba/avro parses the schema and reads the bytes).
func FuzzAvroValue(f *testing.F) {
	for _, seed := range []string{`{"a": 1}`, `{"a": [1, 2], "b": {"c": null}}`, `{"a": [[{"x": 1}]]}`, `{"a": []}`,
		`{"a": 1.5e300, "b": -0.0, "c": 9223372036854775807}`, `[1]`, `plain`, `{"first-name": 1}`, `{"a": [1, "x"]}`, ``} {
		f.Add([]byte(seed), true, false)
		f.Add([]byte(seed), false, true)
	}
	f.Fuzz(func(t *testing.T, payload []byte, expand, envelope bool) {
		e := &outbox.Event{ID: "1", AggregateType: "order", AggregateID: "7", Payload: payload, PayloadType: "jsonb",
			Table: "public.outbox"}
		if envelope {
			e.Envelope = []outbox.Field{{Key: "kind", Value: "x"}}
		}
		fm := record.Format{ValueConverter: record.Avro, TopicPrefix: "p",
			ExpandJSON: record.ExpandJSON{Enabled: expand, KeepNulls: true, KeepEmptyArrays: true, PayloadColumn: "payload"},
			Schemas:    &record.Schemas{Topic: func(*outbox.Event) string { return "t" }}}
		needs, err := fm.Needs(e, nil)
		if err != nil {
			return // an UnwritableError: a dead letter, nothing written
		}
		text := ""
		for _, n := range needs {
			fm.Schemas.Store(n.Subject, n.Schema, 1)
			text = n.Schema
		}
		v, tomb := fm.Value(e)
		if tomb || text == "" {
			return
		}
		s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
		if err != nil {
			t.Fatalf("schema does not parse: %v\n%s", err, text)
		}
		var out any
		if err := avro.Unmarshal(s, v[5:], &out); err != nil {
			t.Fatalf("value does not decode: %v\nschema %s\nbytes % x", err, text, v)
		}
	})
}
