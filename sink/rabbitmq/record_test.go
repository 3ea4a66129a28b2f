package rabbitmq_test

import (
	"testing"
	"time"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/sink/rabbitmq"
)

// With the record settings a message carries what package record makes of the
// event: the JSON value converter's value as the body, Debezium's header values
// (record-headers debezium: the id alone of walrelay's own, placed columns as
// Connect writes them, a NULL column as a void value), and a tombstone on an empty
// payload (tombstone-on-empty-payload).
func TestRecordFormat(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	prefix := uniqueName(t)
	b.exchange(t, prefix, false)
	queue := b.queue(t, prefix, prefix, "#")
	cfg := rabbitmq.DefaultConfig()
	cfg.URL = b.url
	cfg.ExchangeTemplate = prefix
	cfg.Format = record.Format{ValueConverter: record.JSON, IDHeaderOnly: true, TombstoneOnEmpty: true}
	s := newSink(t, cfg)
	o := newOutcomes()
	e := event(prefix+"-1", "order", "a-1", "created")
	e.Payload, e.PayloadType = []byte(`{"id": 1}`), "jsonb"
	e.Headers = []outbox.Header{
		{Key: "paid", Value: "t", Type: "boolean"},
		{Key: "at", Value: "2024-05-01 14:00:00.123456+02", Type: "timestamp with time zone"},
		{Key: "note", Type: "text", Null: true},
	}
	empty := event(prefix+"-2", "order", "a-1", "deleted")
	empty.Payload, empty.PayloadType = []byte("  "), "text"
	o.publish(s, e)
	o.publish(s, empty)
	flush(t, s, 10*time.Second)
	if !waitUntil(10*time.Second, func() bool { return queue.distinct() == 2 }) {
		t.Fatalf("%d of 2 messages consumed", queue.distinct())
	}
	got := queue.deliveries()
	// The JSON converter writes a jsonb payload as a JSON string (JsonConverter on
	// the router's string payload), the same bytes as the Kafka sink's value.
	if value, _ := cfg.Format.Value(e); string(got[0].Body) != `"{\"id\": 1}"` || string(value) != string(got[0].Body) {
		t.Errorf("body %q (record %q), want %q", got[0].Body, value, `"{\"id\": 1}"`)
	}
	h := got[0].Headers
	for key, want := range map[string]any{"id": e.ID, "paid": "true", "at": "2024-05-01T12:00:00.123456Z"} {
		if h[key] != want {
			t.Errorf("header %s: %#v, want %#v", key, h[key], want)
		}
	}
	if v, ok := h["note"]; !ok || v != nil {
		t.Errorf("header note: %#v (present %v), want a void value", v, ok)
	}
	for _, key := range []string{"event_type", "aggregate_type", "aggregate_id", "created_at", "tombstone"} {
		if v, ok := h[key]; ok {
			t.Errorf("header %s: %#v, want none under record-headers debezium", key, v)
		}
	}
	if h := got[1].Headers; h["tombstone"] != true || len(got[1].Body) != 0 || got[1].MessageId != empty.ID {
		t.Errorf("blank payload: headers %v, body %q, want a tombstone", h, got[1].Body)
	}
}
