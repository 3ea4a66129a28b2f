package kafka_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/kafka"
)

// outcomes collects what Publish reported, per aggregate id.
type outcomes struct {
	mu   sync.Mutex
	errs map[string]error
}

type outcome struct {
	o  *outcomes
	id string
}

func (d outcome) Done(err error) {
	d.o.mu.Lock()
	defer d.o.mu.Unlock()
	d.o.errs[d.id] = err
}

// One partition whose leader keeps refusing writes past the event timeout, while
// the other partition acknowledges: its records fail as an outage, not as poisoned
// events, so the relay keeps their order instead of handing them to the poller. A
// record the broker refuses for its size is still an event failure.
func TestUnavailablePartitionIsNotAPoisonEvent(t *testing.T) {
	t.Parallel()
	broker := testenv.Kafka(t)
	if err := broker.CreateTopic("outbox.event.order", 2, nil); err != nil {
		t.Fatal(err)
	}
	if err := broker.CreateTopic("outbox.event.big", 1, map[string]string{"max.message.bytes": "1024"}); err != nil {
		t.Fatal(err)
	}
	down := broker.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "outbox.event.order", Partitions: []int32{1},
		Err: kerr.NotLeaderForPartition, Count: -1})
	defer down.Remove()

	// Aggregates named down-* go to partition 1, the rest to partition 0.
	partitioner := kgo.BasicConsistentPartitioner(func(string) func(*kgo.Record, int) int {
		return func(r *kgo.Record, _ int) int {
			if strings.HasPrefix(string(r.Key), "down-") {
				return 1
			}
			return 0
		}
	})
	s, err := kafka.New(kafka.Config{Brokers: broker.ListenAddrs(), TopicTemplate: kafka.DefaultTopicTemplate,
		EventTimeout: time.Second, Opts: []kgo.Opt{kgo.RecordPartitioner(partitioner),
			// franz-go retries a refused partition after a metadata refresh; the default
			// minimum age (5s) would only slow the test down.
			kgo.MetadataMinAge(100 * time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	const perPartition = 20
	res := &outcomes{errs: map[string]error{}}
	var ids []string
	publish := func(aggType, aggID string, payload []byte) {
		ids = append(ids, aggID)
		s.Publish(&outbox.Event{ID: aggID, AggregateType: aggType, AggregateID: aggID, EventType: "created",
			Payload: payload, CreatedAt: time.Now()}, outcome{res, aggID})
	}
	for i := range perPartition {
		publish("order", "down-"+string(rune('a'+i)), []byte("{}"))
		publish("order", "up-"+string(rune('a'+i)), []byte("{}"))
	}
	big := make([]byte, 4096) // incompressible, so that the batch stays above the topic's limit
	rand.NewChaCha8([32]byte{}).Read(big)
	publish("big", "big-a", big)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if down.Hits() == 0 {
		t.Fatal("the faulted partition was never written to")
	}

	res.mu.Lock()
	defer res.mu.Unlock()
	if len(res.errs) != len(ids) {
		t.Fatalf("%d outcomes for %d events", len(res.errs), len(ids))
	}
	var acked, outage, poisoned int
	for _, id := range ids {
		err := res.errs[id]
		switch {
		case strings.HasPrefix(id, "up-") && err == nil:
			acked++
		case strings.HasPrefix(id, "down-") && errors.Is(err, kgo.ErrRecordTimeout) && !sink.IsEventError(err):
			outage++
		case id == "big-a" && sink.IsEventError(err) && errors.Is(err, kerr.MessageTooLarge):
			poisoned++
		default:
			t.Errorf("event %s: %v (event error: %v)", id, err, sink.IsEventError(err))
		}
	}
	if acked != perPartition || outage != perPartition || poisoned != 1 {
		t.Fatalf("healthy partition acked %d of %d, unavailable partition failed as an outage %d of %d, too large an event failed as an event %d of 1",
			acked, perPartition, outage, perPartition, poisoned)
	}
}
