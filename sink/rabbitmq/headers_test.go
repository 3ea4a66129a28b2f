package rabbitmq_test

import (
	"testing"
	"time"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink/rabbitmq"
)

// Headers taken from columns join the message's headers table; a NULL payload is
// an empty body with tombstone = true.
func TestHeadersFromColumns(t *testing.T) {
	t.Parallel()
	b := newBroker(t)
	prefix := uniqueName(t)
	b.exchange(t, prefix, false)
	queue := b.queue(t, prefix, prefix, "#")
	cfg := rabbitmq.DefaultConfig()
	cfg.URL = b.url
	cfg.ExchangeTemplate = prefix
	s := newSink(t, cfg)
	o := newOutcomes()
	placed := event(prefix+"-1", "order", "a-1", "created")
	placed.Headers = []outbox.Header{{Key: "tenant", Value: "acme"}, {Key: "traceparent", Value: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
	tomb := event(prefix+"-2", "order", "a-1", "deleted")
	tomb.Payload, tomb.NullPayload = nil, true
	o.publish(s, placed)
	o.publish(s, tomb)
	flush(t, s, 10*time.Second)
	if !waitUntil(10*time.Second, func() bool { return queue.distinct() == 2 }) {
		t.Fatalf("%d of 2 messages consumed", queue.distinct())
	}
	got := queue.deliveries()
	if h := got[0].Headers; h["tenant"] != "acme" || h["traceparent"] != placed.Headers[1].Value || h["tombstone"] != nil ||
		h["aggregate_id"] != "a-1" || string(got[0].Body) != string(placed.Payload) {
		t.Errorf("first message: headers %v, body %q", h, got[0].Body)
	}
	if h := got[1].Headers; h["tombstone"] != true || len(got[1].Body) != 0 || got[1].MessageId != tomb.ID {
		t.Errorf("tombstone: headers %v, body %q", h, got[1].Body)
	}
}
