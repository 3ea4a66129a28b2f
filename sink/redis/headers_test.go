package redis_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/walrelay/walrelay/outbox"
)

// Headers taken from columns are fields of the entry after the sink's own; a NULL
// payload is an empty payload field marked tombstone. Events with and without
// extra fields share one batch (one script call).
func TestEntryHeaderFields(t *testing.T) {
	t.Parallel()
	r := newTestRedis(t)
	s := newSink(t, r.config())
	placed := event("order", "o-1", 1)
	placed.Headers = []outbox.Header{{Key: "tenant", Value: "acme"}, {Key: "traceparent", Value: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
	plain := event("order", "o-2", 2)
	tomb := event("order", "o-3", 3)
	tomb.Payload, tomb.NullPayload = nil, true
	tomb.Headers = []outbox.Header{{Key: "tenant", Value: "globex"}}
	o := newOutcomes()
	for _, e := range []*outbox.Event{placed, plain, tomb} {
		o.publish(s, e)
	}
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	entries := r.read(r.prefix + "order")
	if len(entries) != 3 {
		t.Fatalf("%d entries, want 3", len(entries))
	}
	own := func(e *outbox.Event, payload string) map[string]string {
		return map[string]string{"id": e.ID, "event_type": e.EventType, "aggregate_type": "order", "aggregate_id": e.AggregateID,
			"created_at": e.CreatedAt.UTC().Format("2006-01-02T15:04:05.999999999Z07:00"), "payload": payload}
	}
	wants := []map[string]string{own(placed, string(placed.Payload)), own(plain, string(plain.Payload)), own(tomb, "")}
	wants[0]["tenant"], wants[0]["traceparent"] = "acme", placed.Headers[1].Value
	wants[2]["tenant"], wants[2]["tombstone"] = "globex", "true"
	for i, want := range wants {
		if got := entries[i].Fields; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("entry %d: fields %v\nwant %v", i, got, want)
		}
	}
}
