package record_test

import (
	"testing"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
)

// One Format's Needs over payloads of alternating shapes: each event's schema is
// its own shape's, whether the previous expansion had the same shape (its text
// reused) or another one.
func TestAvroExpandedSchemaFollowsShape(t *testing.T) {
	f := record.Format{ValueConverter: record.Avro, ExpandJSON: record.ExpandJSON{Enabled: true, PayloadColumn: "payload"},
		Schemas: &record.Schemas{Topic: func(*outbox.Event) string { return "t" }}}
	payloads := []string{`{"a":1}`, `{"a":2}`, `{"a":"x"}`, `{"a":"y"}`, `{"a":3,"b":true}`, `{"a":4}`}
	want := map[string]string{}
	for _, p := range payloads {
		e := &outbox.Event{ID: "1", AggregateType: "order", AggregateID: "7", PayloadType: "jsonb", Payload: []byte(p)}
		fresh := f
		fresh.Schemas = &record.Schemas{Topic: f.Schemas.Topic}
		needs, err := fresh.Needs(e, nil)
		if err != nil || len(needs) != 1 {
			t.Fatalf("%s: fresh needs %+v, %v", p, needs, err)
		}
		want[p] = needs[0].Schema
		got, err := f.Needs(e, nil)
		if err != nil || len(got) != 1 || got[0].Schema != want[p] {
			t.Errorf("%s: needs %+v, %v; want the schema %s", p, got, err, want[p])
		}
	}
	if want[`{"a":1}`] != want[`{"a":2}`] || want[`{"a":1}`] == want[`{"a":"x"}`] || want[`{"a":1}`] == want[`{"a":3,"b":true}`] {
		t.Errorf("schemas by payload: %v", want)
	}
}
