package main_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
)

// A SIGTERM in the middle of a large transaction: the relay reads on to the
// transaction's commit within the shutdown timeout and confirms it, so the restart
// publishes none of it again. Before, the stream stopped reading at once, the commit
// never arrived, and the restart repeated everything published before the signal.
func TestGracefulStopMidTransactionRepeatsNothing(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	kafka := testenv.Kafka(t)
	// Each produce request is answered 20ms late, as a real broker with acks=all takes
	// its time: with the small window below, the transaction takes seconds to publish
	// and the signal lands inside it, also when no bookkeeping slows the relay.
	kafka.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		kafka.SleepControl(func() { time.Sleep(20 * time.Millisecond) }) // broker latency
		return nil, nil, false
	})
	brokers := kafka.ListenAddrs()
	slot := slotName(t, "")
	conn := testenv.Connect(t, dbURL)
	ctx := context.Background()
	env := relayEnv(dbURL, brokers)
	// A small window slows the transaction's publication so that the signal lands
	// inside it; rare status updates leave the confirmation to the stop.
	args := []string{"run", "--slot", slot, "--shutdown-timeout", "60s", "--max-inflight-events", "200",
		"--status-interval", "30s", "--keepalive-interval", "30s"}

	first := startProc(t, "relay#1", env, args...)
	waitStreaming(t, conn, slot, first)
	consumer := testenv.NewConsumer(t, brokers, `outbox\..*`)

	const rows = 60_000
	if _, err := conn.Exec(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
		SELECT 'order', 'big-' || (g % 10), 'bulk', jsonb_build_object('n', g) FROM generate_series(1, $1) g`, rows); err != nil {
		t.Fatal(err)
	}
	if !consumer.WaitDistinct(2*time.Minute, rows/10) {
		t.Fatalf("only %d of %d events published before the stop", consumer.Distinct(), rows)
	}
	atSignal := consumer.Distinct()
	first.stop(70 * time.Second)
	if atSignal >= rows {
		t.Fatalf("the whole transaction was published before the signal; the test needs it to land inside")
	}
	t.Logf("SIGTERM with about %d of %d events of the transaction published", atSignal, rows)

	second := startProc(t, "relay#2", env, args...)
	waitStreaming(t, conn, slot, second)
	aggs := make([]string, 10)
	for i := range aggs {
		aggs[i] = fmt.Sprintf("big-%d", i)
	}
	markers := testenv.WriteTx(t, conn, aggs, "marker", len(aggs), false)
	// A marker lands in its aggregate's partition after anything the restart could
	// publish again: once all are in, every repeat is visible.
	if !consumer.WaitFor(2*time.Minute, func() bool {
		for _, m := range markers {
			if consumer.Count(m.ID) == 0 {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("markers not delivered after the restart (%d distinct)", consumer.Distinct())
	}
	if got := consumer.Distinct(); got != rows+len(markers) {
		t.Errorf("%d distinct events, want %d", got, rows+len(markers))
	}
	if repeats := len(consumer.Records) - consumer.Distinct(); repeats != 0 {
		t.Errorf("the restart published %d events again, want 0", repeats)
	}
	second.stop(30 * time.Second)
}
