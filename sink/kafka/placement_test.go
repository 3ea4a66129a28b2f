package kafka_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/kafka"
)

// Headers from columns follow the sink's own; a preset partition is honoured, a
// record without one keeps the key hash; a NULL payload is a tombstone; a partition
// that is no partition of the topic, or no number, fails that event alone.
func TestPlacedHeadersPartitionAndTombstone(t *testing.T) {
	t.Parallel()
	broker := testenv.Kafka(t)
	const topic = "outbox.event.order"
	if err := broker.CreateTopic(topic, 3, nil); err != nil {
		t.Fatal(err)
	}
	s, err := kafka.New(kafka.Config{Brokers: broker.ListenAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	events := []*outbox.Event{
		{ID: "placed", AggregateID: "agg-1", Partition: "2", Payload: []byte(`{"a":1}`),
			Headers: []outbox.Header{{Key: "tenant", Value: "acme"}, {Key: "traceparent", Value: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}},
		{ID: "zero", AggregateID: "agg-1", Partition: "0", Payload: []byte(`{}`)},
		{ID: "hashed", AggregateID: "agg-2", Payload: []byte(`{}`)},
		{ID: "tombstone", AggregateID: "agg-3", NullPayload: true},
		{ID: "beyond", AggregateID: "agg-4", Partition: "7", Payload: []byte(`{}`)},
		{ID: "negative", AggregateID: "agg-4", Partition: "-1", Payload: []byte(`{}`)},
		{ID: "word", AggregateID: "agg-4", Partition: "two", Payload: []byte(`{}`)},
	}
	res := &outcomes{errs: map[string]error{}}
	for _, e := range events {
		e.AggregateType, e.EventType, e.CreatedAt = "order", "created", time.Now()
		s.Publish(e, outcome{res, e.ID})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	res.mu.Lock()
	for id, want := range map[string]string{"beyond": "not a partition of topic " + topic, "negative": "not a partition number",
		"word": `"two" is not a partition number`} {
		if err := res.errs[id]; !sink.IsEventError(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("event %s: %v, want an event error saying %q", id, err, want)
		}
	}
	for _, id := range []string{"placed", "zero", "hashed", "tombstone"} {
		if err, ok := res.errs[id]; !ok || err != nil {
			t.Errorf("event %s: outcome %v (reported %v), want acked", id, err, ok)
		}
	}
	res.mu.Unlock()

	cl, err := kgo.NewClient(kgo.SeedBrokers(broker.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[string]*kgo.Record{}
	for len(got) < 4 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume: %v (%d of 4 records)", err, len(got))
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Headers[0].Value)] = r })
	}
	hash := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	for id, want := range map[string]int32{"placed": 2, "zero": 0,
		"hashed": int32(hash.Partition(&kgo.Record{Key: []byte("agg-2")}, 3)), "tombstone": int32(hash.Partition(&kgo.Record{Key: []byte("agg-3")}, 3))} {
		if r := got[id]; r == nil || r.Partition != want {
			t.Errorf("record %s: %+v, want partition %d", id, r, want)
		}
	}
	var keys []string
	for _, h := range got["placed"].Headers {
		keys = append(keys, h.Key+"="+string(h.Value))
	}
	if want := []string{"tenant=acme", "traceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}; len(keys) != 7 ||
		keys[0] != "id=placed" || !slices.Equal(keys[5:], want) {
		t.Errorf("headers %q, want the sink's five, then %q", keys, want)
	}
	if r := got["tombstone"]; r.Value != nil {
		t.Errorf("tombstone value %q, want null", r.Value)
	}
	if r := got["hashed"]; string(r.Value) != "{}" {
		t.Errorf("value %q", r.Value)
	}
}
