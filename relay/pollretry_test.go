package relay_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/kafka"
)

// refuseOnce refuses each event's first publish with an event error, which makes
// the poller record a failed attempt and schedule a retry, and hands every later
// publish to the broker.
type refuseOnce struct {
	sink.Sink
	mu      sync.Mutex
	refused map[string]bool
}

func (s *refuseOnce) Publish(e *outbox.Event, done sink.Done) {
	s.mu.Lock()
	first := !s.refused[e.ID]
	s.refused[e.ID] = true
	s.mu.Unlock()
	if first {
		done.Done(&sink.EventError{Err: errors.New("refused by the test")})
		return
	}
	s.Sink.Publish(e, done)
}

// In poll mode a row whose publish failed is retried once its backoff (a second
// here) is over, not at the next poll interval (half a minute here): the worker
// that recorded the failure wakes when the row is due.
func TestPollModeRetriesWhenDue(t *testing.T) {
	t.Parallel()
	// A cluster of its own: poll mode holds a row back while any older transaction of
	// the cluster runs, and the parallel tests on the shared cluster keep some open.
	_, dbURL := ownCluster(t, "", nil)
	broker, conn := testenv.Kafka(t), testenv.Connect(t, dbURL)
	kafkaSink, err := kafka.New(kafka.Config{Brokers: broker.ListenAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kafkaSink.Close)
	refusing := &refuseOnce{Sink: kafkaSink, refused: map[string]bool{}}
	const interval = 30 * time.Second
	written := testenv.WriteTx(t, conn, []string{"r"}, "retried", 3, false)
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	start(t, dbURL, broker, "unused", func(c *config) {
		c.Mode = relay.ModePoll
		c.PollInterval = interval
		c.Retry = poller.Policy{MaxAttempts: 5, BackoffMin: time.Second, BackoffMax: time.Second}
		c.Sink = refusing
	})
	waitFor(t, interval/3, "the first attempts to fail", func() bool {
		var failed int
		err := conn.QueryRow(t.Context(), "SELECT count(*) FROM outbox_events WHERE attempts = 1").Scan(&failed)
		return err == nil && failed == len(written)
	})
	// The backoff is at most a second: a third of the interval leaves ample room on a
	// loaded machine, and a worker that waited for the interval would not be there yet.
	if !consumer.WaitDistinct(interval/3, len(written)) {
		t.Fatalf("%d of %d events retried within %s of their failure, with a backoff of 1s and a poll interval of %s",
			consumer.Distinct(), len(written), interval/3, interval)
	}
	waitFor(t, interval/3, "every retried row marked published", func() bool {
		var pending int
		err := conn.QueryRow(t.Context(), "SELECT count(*) FROM outbox_events WHERE processed_at IS NULL").Scan(&pending)
		return err == nil && pending == 0
	})
	for _, ev := range written {
		if n := consumer.Count(ev.ID); n != 1 {
			t.Errorf("event %s published %d times, want once", ev.ID, n)
		}
	}
}
