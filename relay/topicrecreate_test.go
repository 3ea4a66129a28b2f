package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
)

// A topic deleted and created again under its name (a new topic ID) does not stop the
// relay: once the producer's stale metadata fails, it reloads the topic, and every
// event, written before and after, is delivered without a restart.
func TestTopicDeletedAndCreatedAgain(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	rn := start(t, dbURL, broker, "recreate")
	const topic = "outbox.event.order"
	before := testenv.WriteTx(t, conn, []string{"r1", "r2"}, "before", 20, false)
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	if !consumer.WaitDistinct(time.Minute, len(before)) {
		t.Fatalf("delivered %d of %d before the topic was recreated", consumer.Distinct(), len(before))
	}

	admin, err := kgo.NewClient(kgo.SeedBrokers(broker.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := context.Background()
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{topic}
	del.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr(topic)}}
	delResp, err := del.RequestWith(ctx, admin)
	if err != nil || kerr.ErrorForCode(delResp.Topics[0].ErrorCode) != nil {
		t.Fatalf("delete topic: %v %v", err, kerr.ErrorForCode(delResp.Topics[0].ErrorCode))
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, 4, 1
	create.Topics = []kmsg.CreateTopicsRequestTopic{ct}
	createResp, err := create.RequestWith(ctx, admin)
	if err != nil || kerr.ErrorForCode(createResp.Topics[0].ErrorCode) != nil {
		t.Fatalf("create topic: %v %v", err, kerr.ErrorForCode(createResp.Topics[0].ErrorCode))
	}

	after := testenv.WriteTx(t, conn, []string{"r1", "r2"}, "after", 20, false)
	fresh := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	if !fresh.WaitFor(time.Minute, func() bool {
		for _, ev := range after {
			if fresh.Count(ev.ID) == 0 {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("after the topic was created again: %d of %d events delivered", countOf(fresh, after), len(after))
	}
	if !rn.waitLog(5*time.Second, "UNKNOWN_TOPIC_ID") {
		t.Log("the stale topic ID was not met (the producer refreshed its metadata first)")
	}
}

// countOf counts the events the consumer has.
func countOf(c *testenv.Consumer, events []outbox.Event) int {
	n := 0
	for _, ev := range events {
		if c.Count(ev.ID) > 0 {
			n++
		}
	}
	return n
}
