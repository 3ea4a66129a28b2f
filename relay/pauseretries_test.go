package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
)

// A paused relay publishes nothing, the stream-mode poller's retries included: an
// event the broker keeps refusing is retried every few hundred milliseconds until
// the pause, not once while paused, and delivered after the resume.
func TestPausedRelayRetriesNothing(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	ctx := context.Background()
	// The broker refuses the events of aggregate type "flaky" as invalid records, an
	// error about the event: the stream hands it to the poller, which retries it.
	refuse := broker.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "outbox.event.flaky", Err: kerr.InvalidRecord, Count: -1})
	rn := start(t, dbURL, broker, "pause_retries", fastRetries, func(c *config) { c.Retry.MaxAttempts = 1000 })
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	flaky := outbox.Event{AggregateType: "flaky", AggregateID: "f", EventType: "refused", Payload: []byte(`{"n": 1}`)}
	if err := outbox.Write(ctx, tx, &flaky); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	attempts := func() int {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, "SELECT attempts FROM outbox_events WHERE id = $1", flaky.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFor(t, time.Minute, "the poller to retry the refused event", func() bool { return attempts() >= 3 })

	rn.relay.Pause()
	// Observation windows, not synchronisation: the first lets a poll under way at
	// the pause finish; in the second a running poller would retry several times.
	consumer.WaitFor(time.Second, func() bool { return false })
	atPause, hits := attempts(), refuse.Hits()
	consumer.WaitFor(2*time.Second, func() bool { return false })
	if n, h := attempts(), refuse.Hits(); n != atPause || h != hits {
		t.Fatalf("while paused the poller retried the refused event: attempts %d -> %d, produce requests refused %d -> %d",
			atPause, n, hits, h)
	}

	refuse.Remove()
	rn.relay.Resume()
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(flaky.ID) > 0 }) {
		t.Fatal("the refused event was not delivered after the resume")
	}
	if n := consumer.Count(flaky.ID); n != 1 {
		t.Fatalf("the refused event was delivered %d times, want once", n)
	}
}
