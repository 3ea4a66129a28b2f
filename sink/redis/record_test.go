package redis_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
)

// With the record settings an entry carries what package record makes of the
// event: the JSON value converter's value as the payload field, Debezium's header
// values (record-headers debezium: the id alone of walrelay's own, placed columns
// as Connect writes them, a NULL column as an empty field), and a tombstone on an
// empty payload (tombstone-on-empty-payload).
func TestRecordFormat(t *testing.T) {
	t.Parallel()
	r := newTestRedis(t)
	cfg := r.config()
	cfg.Format = record.Format{ValueConverter: record.JSON, IDHeaderOnly: true, TombstoneOnEmpty: true}
	s := newSink(t, cfg)
	e := event("order", "o-1", 1)
	e.Payload, e.PayloadType = []byte(`{"id": 1}`), "jsonb"
	e.Headers = []outbox.Header{
		{Key: "paid", Value: "t", Type: "boolean"},
		{Key: "at", Value: "2024-05-01 14:00:00.123456+02", Type: "timestamp with time zone"},
		{Key: "note", Type: "text", Null: true},
	}
	empty := event("order", "o-2", 2)
	empty.Payload, empty.PayloadType = []byte("  "), "text"
	o := newOutcomes()
	o.publish(s, e)
	o.publish(s, empty)
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	entries := r.read(r.prefix + "order")
	if len(entries) != 2 {
		t.Fatalf("%d entries, want 2", len(entries))
	}
	// The JSON converter writes a jsonb payload as a JSON string (JsonConverter on
	// the router's string payload), the same bytes as the Kafka sink's value.
	if value, _ := cfg.Format.Value(e); string(value) != `"{\"id\": 1}"` {
		t.Fatalf("record value %q", value)
	}
	wants := []map[string]string{
		{"id": e.ID, "payload": `"{\"id\": 1}"`, "paid": "true", "at": "2024-05-01T12:00:00.123456Z", "note": ""},
		{"id": empty.ID, "payload": "", "tombstone": "true"},
	}
	for i, want := range wants {
		if got := entries[i].Fields; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("entry %d: fields %v\nwant %v", i, got, want)
		}
	}
}
