package kafka_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/kafka"
)

// silence makes the broker hold every produce request until the returned release is
// called, as a broker that stops answering does.
func silence(broker *kfake.Cluster) (release func()) {
	var silent atomic.Bool
	silent.Store(true)
	wake := make(chan struct{})
	broker.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		broker.KeepControl()
		if silent.Load() {
			broker.SleepControl(func() { <-wake })
		}
		return nil, nil, false
	})
	return func() {
		silent.Store(false)
		close(wake)
	}
}

// bigEvents are n events of about 10 kB over a few aggregates, their index in the
// payload.
func bigEvents(prefix string, n int) []*outbox.Event {
	pad := make([]byte, 10<<10)
	for i := range pad {
		pad[i] = 'x'
	}
	evs := make([]*outbox.Event, n)
	for i := range evs {
		evs[i] = &outbox.Event{ID: fmt.Sprintf("%s-%04d", prefix, i), AggregateType: "order", AggregateID: "agg-" + strconv.Itoa(i%3),
			EventType: "created", CreatedAt: time.Now(), Payload: fmt.Appendf(nil, `{"i":%d,"pad":%q}`, i, pad)}
	}
	return evs
}

// inOrder checks that every event was consumed and that each aggregate's events
// came in publish order.
func inOrder(t *testing.T, c *testenv.Consumer, evs []*outbox.Event) {
	t.Helper()
	if !c.WaitDistinct(time.Minute, len(evs)) {
		t.Fatalf("consumed %d of %d events", c.Distinct(), len(evs))
	}
	last := map[string]string{}
	for _, r := range c.Records {
		id := testenv.Header(r, "id")
		if prev, ok := last[string(r.Key)]; ok && id <= prev {
			t.Fatalf("aggregate %s: event %s after %s", r.Key, id, prev)
		}
		last[string(r.Key)] = id
	}
}

// The fault: Publish waited in franz-go's Produce while the client's buffer was full
// and the broker silent, on the relay's goroutine that reads the WAL. Publish now
// returns at once; the records wait in the sink and reach the broker, in order per
// aggregate, once it answers.
func TestPublishBlockedOnAFullProducerBuffer(t *testing.T) {
	t.Parallel()
	broker := testenv.Kafka(t)
	snk, err := kafka.New(kafka.Config{Brokers: broker.ListenAddrs(), MaxBufferedEvents: 10, MaxBufferedBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer snk.Close()
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\.order`)
	release := silence(broker)

	evs := bigEvents("full", 200) // 2 MB, thirty times the buffer
	res := &outcomes{errs: map[string]error{}}
	testenv.ReturnsWithin(t, 10*time.Second, "Publish, with the broker silent and the client's buffer full,", func() {
		for _, e := range evs {
			snk.Publish(e, outcome{res, e.ID})
		}
	})
	release()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := snk.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	res.mu.Lock()
	for _, e := range evs {
		if err, ok := res.errs[e.ID]; !ok || err != nil {
			t.Errorf("event %s: outcome %v (told: %v), want acknowledged", e.ID, err, ok)
		}
	}
	res.mu.Unlock()
	inOrder(t, consumer, evs)
}

// The same fault on the exactly-once path: the transactional producer's Produce
// returned only once its client's buffer had room.
func TestStreamProducerBlockedOnAFullProducerBuffer(t *testing.T) {
	t.Parallel()
	broker := testenv.Kafka(t)
	snk, err := kafka.New(kafka.Config{Brokers: broker.ListenAddrs(), MaxBufferedEvents: 10, MaxBufferedBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer snk.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tx, _, _, err := snk.OpenStream(ctx, "sys/db/full")
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\.order`, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	release := silence(broker)

	evs := bigEvents("txn", 200)
	testenv.ReturnsWithin(t, 10*time.Second, "Produce, with the broker silent and the client's buffer full,", func() {
		for _, e := range evs {
			if err := tx.Produce(e); err != nil {
				t.Errorf("produce %s: %v", e.ID, err)
			}
		}
	})
	release()
	if err := tx.Commit(ctx, sink.Position{LSN: 0x1000, Events: -1}); err != nil {
		t.Fatal(err)
	}
	inOrder(t, consumer, evs)
}
