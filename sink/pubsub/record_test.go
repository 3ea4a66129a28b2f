package pubsub_test

import (
	"fmt"
	"testing"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/sink/pubsub"
)

// With the record settings a message carries what package record makes of the
// event: the JSON value converter's value as the data, Debezium's header values
// (record-headers debezium: the id alone of walrelay's own, placed columns as
// Connect writes them, a NULL column as an empty attribute), and a tombstone on an
// empty payload (tombstone-on-empty-payload).
func TestRecordFormat(t *testing.T) {
	t.Parallel()
	format := record.Format{ValueConverter: record.JSON, IDHeaderOnly: true, TombstoneOnEmpty: true}
	f, topic, s := start(t, func(c *pubsub.Config) { c.Format = format })
	o := newOutcomes()
	e := event("order", "o-1")
	e.Payload, e.PayloadType = []byte(`{"id": 1}`), "jsonb"
	e.Headers = []outbox.Header{
		{Key: "paid", Value: "t", Type: "boolean"},
		{Key: "at", Value: "2024-05-01 14:00:00.123456+02", Type: "timestamp with time zone"},
		{Key: "note", Type: "text", Null: true},
	}
	empty := event("order", "o-1")
	empty.Payload, empty.PayloadType = []byte("  "), "text"
	o.publish(s, e)
	o.publish(s, empty)
	o.wait(t, 2)
	for _, ev := range []*outbox.Event{e, empty} {
		if errs := o.of(ev.ID); len(errs) != 1 || errs[0] != nil {
			t.Fatalf("event %s: %v", ev.ID, errs)
		}
	}
	msgs := f.messages(topic)
	if len(msgs) != 2 {
		t.Fatalf("topic holds %d messages, want 2", len(msgs))
	}
	// The JSON converter writes a jsonb payload as a JSON string (JsonConverter on
	// the router's string payload), the same bytes as the Kafka sink's value.
	value, _ := format.Value(e)
	want := map[string]string{"id": e.ID, "paid": "true", "at": "2024-05-01T12:00:00.123456Z", "note": ""}
	if m := msgs[0]; fmt.Sprint(m.Attributes) != fmt.Sprint(want) || string(m.Data) != `"{\"id\": 1}"` || string(m.Data) != string(value) ||
		m.OrderingKey != "o-1" {
		t.Errorf("message: attributes %v, data %q (record %q), ordering key %q; want %v, %q", m.Attributes, m.Data, value, m.OrderingKey,
			want, `"{\"id\": 1}"`)
	}
	want = map[string]string{"id": empty.ID, "tombstone": "true"}
	if m := msgs[1]; fmt.Sprint(m.Attributes) != fmt.Sprint(want) || len(m.Data) != 0 {
		t.Errorf("blank payload: attributes %v, data %q; want %v and a tombstone", m.Attributes, m.Data, want)
	}
}
