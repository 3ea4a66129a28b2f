package kafka

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/walrelay/walrelay/outbox"
	rec "github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/sink"
)

// BenchmarkRecordCycle measures what one event costs the Kafka sink outside
// franz-go: its record built, then recycled by a successful promise.
func BenchmarkRecordCycle(b *testing.B) {
	tmpl, err := sink.ParseTemplate(DefaultTopicTemplate)
	if err != nil {
		b.Fatal(err)
	}
	s := &Sink{topic: tmpl, feed: newFeed(nil, nil, 1, 1)}
	ev := &outbox.Event{ID: "0b5c9b0e-4c55-4a7e-9d1c-2f3f5b1c8e11", AggregateType: "order", AggregateID: "order-42",
		EventType: "order.created", Payload: make([]byte, 200), CreatedAt: time.Now()}
	acked := 0
	done := sink.DoneFunc(func(err error) { acked++ })
	f := &rec.Format{} // the sink's own, made once as the sink makes it
	b.ReportAllocs()
	for b.Loop() {
		r := newRecord(s.topic, &s.topics, f, ev, done)
		if len(r.Headers) != 5 || r.Topic != "outbox.event.order" {
			b.Fatal("record not built")
		}
		s.promise(&r.Record, nil)
	}
	if acked != b.N {
		b.Fatalf("%d acks for %d records", acked, b.N)
	}
}

// Errors about one record are event errors; a partition, broker or producer that
// fails is not, even while other records are acknowledged: each case follows a
// successful record through the same promise.
func TestClassify(t *testing.T) {
	tmpl, err := sink.ParseTemplate(DefaultTopicTemplate)
	if err != nil {
		t.Fatal(err)
	}
	ev := &outbox.Event{ID: "e1", AggregateType: "order", AggregateID: "order-1", EventType: "order.created", CreatedAt: time.Now()}
	for _, tc := range []struct {
		name  string
		err   error
		event bool
	}{
		// About the record.
		{"too large", fmt.Errorf("%w (uncompressed_bytes=2048)", kerr.MessageTooLarge), true},
		{"batch too large", kerr.RecordListTooLarge, true},
		{"invalid record", kerr.InvalidRecord, true},
		{"corrupt message", kerr.CorruptMessage, true},
		{"invalid topic", kerr.InvalidTopicException, true},
		{"not authorised for the topic", kerr.TopicAuthorizationFailed, true},
		{"unknown topic after retries", kerr.UnknownTopicOrPartition, true},
		{"timeout waiting for an unknown topic", fmt.Errorf("%w, last err: %w", kgo.ErrRecordTimeout, kerr.UnknownTopicOrPartition), true},
		// A partition or its broker unavailable.
		{"timeout", kgo.ErrRecordTimeout, false},
		{"retries", kgo.ErrRecordRetries, false},
		{"timeout waiting for a leader", fmt.Errorf("%w, last err: %w", kgo.ErrRecordTimeout, kerr.LeaderNotAvailable), false},
		{"not leader", kerr.NotLeaderForPartition, false},
		{"leader not available", kerr.LeaderNotAvailable, false},
		{"not enough replicas", kerr.NotEnoughReplicas, false},
		{"not enough replicas after append", kerr.NotEnoughReplicasAfterAppend, false},
		{"request timed out", kerr.RequestTimedOut, false},
		{"broker not available", kerr.BrokerNotAvailable, false},
		{"storage error", kerr.KafkaStorageError, false},
		{"topic recreated", kerr.UnknownTopicID, false},
		{"network", errors.New("dial tcp: connection refused"), false},
		// The producer, its transaction or the relay's clock: every record alike.
		{"not authorised for the cluster", kerr.ClusterAuthorizationFailed, false},
		{"fenced", kerr.ProducerFenced, false},
		{"invalid epoch", kerr.InvalidProducerEpoch, false},
		{"out of order sequence", kerr.OutOfOrderSequenceNumber, false},
		{"invalid timestamp", kerr.InvalidTimestamp, false},
		{"client closed", kgo.ErrClientClosed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Sink{topic: tmpl, feed: newFeed(nil, nil, 1, 1)}
			var got []error
			done := sink.DoneFunc(func(err error) { got = append(got, err) })
			failing := newRecord(s.topic, &s.topics, &rec.Format{}, ev, done)
			s.promise(&newRecord(s.topic, &s.topics, &rec.Format{}, ev, done).Record, nil) // another record acknowledged meanwhile
			s.promise(&failing.Record, tc.err)
			if len(got) != 2 || got[0] != nil {
				t.Fatalf("outcomes %v, want an ack then the failure", got)
			}
			if ev := sink.IsEventError(got[1]); ev != tc.event {
				t.Fatalf("IsEventError(%v) = %v, want %v", got[1], ev, tc.event)
			}
			if !errors.Is(got[1], tc.err) {
				t.Fatalf("classification lost the cause: %v", got[1])
			}
		})
	}
}

// The exactly-once producer poisons, and so hands over, only records that fail
// for what they are, each by its table and id; a partition that is down fails the
// transaction alone.
func TestTransactionalPoison(t *testing.T) {
	tmpl, err := sink.ParseTemplate(DefaultTopicTemplate)
	if err != nil {
		t.Fatal(err)
	}
	var topics topicCache
	ev := &outbox.Event{ID: "e1", Table: "public.a", AggregateType: "order", AggregateID: "o-1"}
	key := sink.EventKey{Table: "public.a", ID: "e1"}
	for _, tc := range []struct {
		name     string
		err      error
		poisoned bool
	}{
		{"too large", kerr.MessageTooLarge, true},
		{"not authorised for the topic", kerr.TopicAuthorizationFailed, true},
		{"not leader", kerr.NotLeaderForPartition, false},
		{"not enough replicas", kerr.NotEnoughReplicas, false},
		{"timeout", kgo.ErrRecordTimeout, false},
		{"not authorised for the cluster", kerr.ClusterAuthorizationFailed, false},
		{"fenced", kerr.ProducerFenced, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tx := &Transactional{feed: newFeed(nil, nil, 1, 1)}
			r := newTxnRecord(tmpl, &topics, &rec.Format{}, ev)
			tx.promise(&r.Record, tc.err)
			if tx.err == nil {
				t.Fatal("the failure did not fail the transaction")
			}
			poison := tx.Poisoned()
			if got := len(poison) == 1; got != tc.poisoned {
				t.Fatalf("poisoned %v, want %v", poison, tc.poisoned)
			}
			if tc.poisoned && !sink.IsEventError(poison[key]) {
				t.Fatalf("poison %v is not an event error of %v", poison, key)
			}
		})
	}
}

// An event that carries its table's topic template goes to that template's topic,
// others to the sink's; once a name is cached, neither costs an allocation.
func TestRecordTopicPerTable(t *testing.T) {
	tmpl, err := sink.ParseTemplate(DefaultTopicTemplate)
	if err != nil {
		t.Fatal(err)
	}
	s := &Sink{topic: tmpl, feed: newFeed(nil, nil, 1, 1)}
	own := &outbox.Event{ID: "e1", AggregateType: "order", AggregateID: "o-1", EventType: "placed"}
	tenant := &outbox.Event{ID: "e2", AggregateType: "order", AggregateID: "o-1", EventType: "placed",
		TopicTemplate: "tenant_b.{aggregate_type}.{event_type}", Table: "tenant_b.outbox"}
	done := sink.DoneFunc(func(error) {})
	for _, tc := range []struct {
		ev   *outbox.Event
		want string
	}{{own, "outbox.event.order"}, {tenant, "tenant_b.order.placed"}, {own, "outbox.event.order"}} {
		r := newRecord(s.topic, &s.topics, &rec.Format{}, tc.ev, done)
		if r.Topic != tc.want {
			t.Errorf("event %s: topic %q, want %q", tc.ev.ID, r.Topic, tc.want)
		}
		s.promise(&r.Record, nil)
	}
	f := &rec.Format{} // the sink's own, made once as the sink makes it
	if allocs := testing.AllocsPerRun(1000, func() {
		r := newRecord(s.topic, &s.topics, f, tenant, done)
		s.promise(&r.Record, nil)
	}); allocs != 0 {
		t.Errorf("%v allocations per record of an event with its own template, want 0", allocs)
	}
}

// The exactly-once producer poisons a record whose partition column names no
// partition, with the reason, as the plain producer fails it.
func TestTransactionalPartitionPoison(t *testing.T) {
	tmpl, err := sink.ParseTemplate(DefaultTopicTemplate)
	if err != nil {
		t.Fatal(err)
	}
	var topics topicCache
	for _, tc := range []struct{ partition, want string }{
		{"x", `partition column value "x" is not a partition number`},
		{"7", "partition column value 7 is not a partition of topic outbox.event.order"},
	} {
		ev := &outbox.Event{ID: "e1", AggregateType: "order", AggregateID: "o-1", Partition: tc.partition}
		r := newTxnRecord(tmpl, &topics, &rec.Format{}, ev)
		if tc.partition == "7" { // what the partitioner does for a topic of 3 partitions
			p := partitioner().ForTopic(r.Topic).(kgo.TopicBackupPartitioner)
			if got := p.PartitionByBackup(&r.Record, 3, nil); got != 7 {
				t.Fatalf("partitioner chose %d, want the preset 7", got)
			}
		}
		tx := &Transactional{feed: newFeed(nil, nil, 1, 1)}
		tx.promise(&r.Record, errors.New("invalid record partitioning choice"))
		if poison := tx.Poisoned()[sink.KeyOf(ev)]; !sink.IsEventError(poison) || !strings.Contains(poison.Error(), tc.want) {
			t.Errorf("partition %q: poison %v, want an event error saying %q", tc.partition, poison, tc.want)
		}
	}
}

// Every byte of a record is held per event in flight, a full window of them at a
// drain's peak: the record of an event without headers of its own fits the
// allocator's 416-byte size class, one with headers the 576-byte one.
func TestRecordSize(t *testing.T) {
	if n := unsafe.Sizeof(narrowRecord{}); n > 416 {
		t.Errorf("a record without the event's headers is %d bytes, want at most 416", n)
	}
	if n := unsafe.Sizeof(wideRecord{}); n > 576 {
		t.Errorf("a record with room for the event's headers is %d bytes, want at most 576", n)
	}
}

// A record carries walrelay's headers and then the event's own, in order, whether
// it comes from the narrow pool (no headers of the event's) or the wide one (room
// for four, more appended); with room enough it costs no allocation, also for a
// created_at in the last year PostgreSQL stores, with nanoseconds.
func TestRecordHeaders(t *testing.T) {
	tmpl, err := sink.ParseTemplate(DefaultTopicTemplate)
	if err != nil {
		t.Fatal(err)
	}
	s := &Sink{topic: tmpl, feed: newFeed(nil, nil, 1, 1)}
	done := sink.DoneFunc(func(error) {})
	for _, n := range []int{0, 1, 4, 6} {
		ev := &outbox.Event{ID: "e1", AggregateType: "order", AggregateID: "o-1", EventType: "placed",
			CreatedAt: time.Date(294276, 12, 31, 23, 59, 59, 999999999, time.UTC)}
		for i := range n {
			ev.Headers = append(ev.Headers, outbox.Header{Key: fmt.Sprintf("h%d", i), Value: fmt.Sprintf("v%d", i)})
		}
		f := &rec.Format{}
		var want []string
		f.EachHeader(ev, func(k string, v []byte) { want = append(want, k+"="+string(v)) })
		for round := range 2 { // the second from the pool
			r := newRecord(s.topic, &s.topics, f, ev, done)
			var got []string
			for _, h := range r.Headers {
				got = append(got, h.Key+"="+string(h.Value))
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("%d headers of the event's, round %d: record headers %q, want %q", n, round, got, want)
			}
			s.promise(&r.Record, nil)
		}
		if n > 4 {
			continue
		}
		if allocs := testing.AllocsPerRun(1000, func() {
			s.promise(&newRecord(s.topic, &s.topics, f, ev, done).Record, nil)
		}); allocs != 0 {
			t.Errorf("%d headers of the event's: %v allocations per record, want 0", n, allocs)
		}
	}
}
