package nats_test

import (
	"slices"
	"testing"
	"time"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
)

// With the record settings a message carries what package record makes of the
// event: the JSON value converter's value as the data, Debezium's header values
// (record-headers debezium: the id alone of walrelay's own, placed columns as
// Connect writes them, a NULL column as an empty header), and a tombstone on an
// empty payload (tombstone-on-empty-payload).
func TestRecordFormat(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := f.config()
	cfg.Format = record.Format{ValueConverter: record.JSON, IDHeaderOnly: true, TombstoneOnEmpty: true}
	s := newSink(t, cfg)
	c := newCollector()
	e := event("0b9d3f8e-0000-4000-8000-000000000021", "order")
	e.Payload, e.PayloadType = []byte(`{"id": 1}`), "jsonb"
	e.Headers = []outbox.Header{
		{Key: "paid", Value: "t", Type: "boolean"},
		{Key: "at", Value: "2024-05-01 14:00:00.123456+02", Type: "timestamp with time zone"},
		{Key: "note", Type: "text", Null: true},
	}
	empty := event("0b9d3f8e-0000-4000-8000-000000000022", "order")
	empty.Payload, empty.PayloadType = []byte("  "), "text"
	s.Publish(e, c.done(e.ID))
	s.Publish(empty, c.done(empty.ID))
	if !c.wait(t, 2, 10*time.Second) {
		t.Fatal("no outcome for every publish within 10s")
	}
	msgs := f.messages(t)
	if len(msgs) != 2 {
		t.Fatalf("stream holds %d messages, want 2", len(msgs))
	}
	// The JSON converter writes a jsonb payload as a JSON string (JsonConverter on
	// the router's string payload), the same bytes as the Kafka sink's value.
	value, _ := cfg.Format.Value(e)
	if want := `"{\"id\": 1}"`; string(msgs[0].Data) != want || string(value) != want {
		t.Errorf("data %q (record %q), want %q", msgs[0].Data, value, want)
	}
	h := msgs[0].Header
	for key, want := range map[string][]string{
		"id": {e.ID}, "paid": {"true"}, "at": {"2024-05-01T12:00:00.123456Z"}, "note": {""},
		"event_type": nil, "aggregate_type": nil, "aggregate_id": nil, "created_at": nil, "tombstone": nil,
	} {
		if !slices.Equal(h[key], want) {
			t.Errorf("header %s: %q, want %q", key, h[key], want)
		}
	}
	if h := msgs[1].Header; !slices.Equal(h["tombstone"], []string{"true"}) || len(msgs[1].Data) != 0 {
		t.Errorf("blank payload: headers %v, data %q, want a tombstone", h, msgs[1].Data)
	}
}
