package nats_test

import (
	"slices"
	"testing"
	"time"

	"github.com/walrelay/walrelay/outbox"
)

// Headers taken from columns are message headers as given (NATS header names are
// case-sensitive, so not canonicalised); a NULL payload is empty data with the
// tombstone header.
func TestHeadersFromColumns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := newSink(t, f.config())
	c := newCollector()
	placed := event("0b9d3f8e-0000-4000-8000-000000000011", "order")
	placed.Headers = []outbox.Header{{Key: "tenant", Value: "acme"}, {Key: "traceparent", Value: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
	tomb := event("0b9d3f8e-0000-4000-8000-000000000012", "order")
	tomb.Payload, tomb.NullPayload = nil, true
	s.Publish(placed, c.done(placed.ID))
	s.Publish(tomb, c.done(tomb.ID))
	if !c.wait(t, 2, 10*time.Second) {
		t.Fatal("no outcome for every publish within 10s")
	}
	msgs := f.messages(t)
	if len(msgs) != 2 {
		t.Fatalf("stream holds %d messages, want 2", len(msgs))
	}
	h := msgs[0].Header
	if !slices.Equal(h["tenant"], []string{"acme"}) || !slices.Equal(h["traceparent"], []string{placed.Headers[1].Value}) ||
		h.Get("id") != placed.ID || h["tombstone"] != nil || string(msgs[0].Data) != string(placed.Payload) {
		t.Errorf("first message: headers %v, data %q", h, msgs[0].Data)
	}
	if h := msgs[1].Header; !slices.Equal(h["tombstone"], []string{"true"}) || len(msgs[1].Data) != 0 || h.Get("id") != tomb.ID {
		t.Errorf("tombstone: headers %v, data %q", h, msgs[1].Data)
	}
}
