package main_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
)

// Exactly-once delivery: SIGKILL the relay repeatedly while it streams; a
// read_committed consumer sees every committed event exactly once. Small Kafka
// transactions and a long status interval make sure kills land between a Kafka
// commit and the LSN confirmation, where at-least-once delivery would repeat events.
func TestExactlyOnceSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	broker := testenv.Kafka(t)
	conn := testenv.Connect(t, dbURL)
	writer := testenv.Connect(t, dbURL)
	slot := slotName(t, "")
	env := relayEnv(dbURL, broker.ListenAddrs(), "WALRELAY_SLOT="+slot, "WALRELAY_DELIVERY=exactly-once",
		"WALRELAY_MAX_INFLIGHT_EVENTS=100", "WALRELAY_STATUS_INTERVAL=2s", "WALRELAY_KEEPALIVE_INTERVAL=2s")
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`, kgo.FetchIsolationLevel(kgo.ReadCommitted()))

	relay := startProc(t, "relay", env, "run")
	waitStreaming(t, conn, slot, relay)
	var written []outbox.Event
	aggs := make([]string, 20)
	for i := range aggs {
		aggs[i] = fmt.Sprintf("eo-%d", i)
	}
	for kill := 0; kill < 3; kill++ {
		for i := 0; i < 20; i++ {
			written = append(written, testenv.WriteTx(t, writer, aggs, "eo", 30, false)...)
		}
		want := len(written) - 300
		if !consumer.WaitDistinct(time.Minute, want) {
			t.Fatalf("before kill %d: %d of %d visible", kill+1, consumer.Distinct(), want)
		}
		relay.signal(syscall.SIGKILL)
		relay.wait(10 * time.Second)
		relay = startProc(t, fmt.Sprintf("relay after kill %d", kill+1), env, "run")
		waitStreaming(t, conn, slot, relay)
	}
	written = append(written, testenv.WriteTx(t, writer, aggs, "eo.last", 30, false)...)
	if !consumer.WaitDistinct(2*time.Minute, len(written)) {
		t.Fatalf("delivered %d of %d", consumer.Distinct(), len(written))
	}
	// Anything repeated would be visible by now: the marker comes after it.
	marker := testenv.WriteTx(t, writer, []string{"marker"}, "marker", 1, false)[0]
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(marker.ID) > 0 }) {
		t.Fatal("marker not delivered")
	}
	dups := len(consumer.Records) - consumer.Distinct()
	t.Logf("exactly-once: %d written, %d records read back, %d duplicates, 3 SIGKILLs", len(written), len(consumer.Records)-1, dups)
	if dups != 0 {
		t.Fatalf("%d duplicates under exactly-once delivery", dups)
	}
	// The published horizon follows within a progress interval.
	var pending int
	if !testenv.Eventually(30*time.Second, func() bool {
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM outbox_events_pending").Scan(&pending); err != nil {
			t.Fatal(err)
		}
		return pending == 0
	}) {
		t.Fatalf("%d rows not published (outbox_events_pending)", pending)
	}
	relay.stop(10 * time.Second)
}

// A position counts a transaction's events as the relay decoded them: here rows and
// table-less events, interleaved. The relay is killed after a Kafka commit in the
// middle of one large transaction (the broker holds every commit after the first 20)
// and started again with messages turned off, which makes the transaction's rows its
// only events: the stored position, counted over rows and messages, must not be read
// as counting rows, which would skip rows that never reached Kafka. Every row is
// delivered (some twice, once).
func TestExactlyOnceRestartWithOtherMessagesPrefixSkipsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := testenv.MigratedDatabase(t)
	broker := testenv.Kafka(t)
	conn := testenv.Connect(t, dbURL)
	const commits = 20 // Kafka transactions let through, of 10 events each (20 in flight, half a window)
	var passed atomic.Int64
	var holding atomic.Bool
	holding.Store(true)
	release := make(chan struct{})
	broker.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		broker.KeepControl()
		if !req.(*kmsg.EndTxnRequest).Commit || !holding.Load() || passed.Add(1) <= commits {
			return nil, nil, false
		}
		broker.SleepControl(func() { <-release })
		return nil, errors.New("commit held by the test"), true // never applied
	})
	defer close(release)
	slot := slotName(t, "")
	env := relayEnv(dbURL, broker.ListenAddrs(), "WALRELAY_SLOT="+slot, "WALRELAY_DELIVERY=exactly-once",
		"WALRELAY_MAX_INFLIGHT_EVENTS=20", "WALRELAY_STATUS_INTERVAL=2s", "WALRELAY_KEEPALIVE_INTERVAL=2s")
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	relay := startProc(t, "relay", env, "run")
	waitStreaming(t, conn, slot, relay)

	const pairs = 3000
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var rows []outbox.Event
	for i := range pairs {
		row := outbox.Event{AggregateType: "order", AggregateID: fmt.Sprintf("o-%d", i%10), EventType: "row", Payload: []byte(`{}`)}
		if err := outbox.Write(ctx, tx, &row); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
		msg := outbox.Event{AggregateType: "order", AggregateID: fmt.Sprintf("o-%d", i%10), EventType: "message", Payload: []byte(`{}`)}
		if err := outbox.Emit(ctx, tx, &msg); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if !testenv.Eventually(time.Minute, func() bool { return passed.Load() > commits }) {
		t.Fatalf("%d Kafka commits in a minute, want %d and one held", passed.Load(), commits)
	}
	relay.signal(syscall.SIGKILL)
	relay.wait(10 * time.Second)
	holding.Store(false)

	relay = startProc(t, "relay without messages", append(env, "WALRELAY_MESSAGES_PREFIX="), "run")
	waitStreaming(t, conn, slot, relay)
	if !consumer.WaitFor(2*time.Minute, func() bool {
		for _, row := range rows {
			if consumer.Count(row.ID) == 0 {
				return false
			}
		}
		return true
	}) {
		missing := 0
		for _, row := range rows {
			if consumer.Count(row.ID) == 0 {
				missing++
			}
		}
		t.Fatalf("%d of the transaction's %d rows never reached Kafka: the restarted relay skipped them", missing, pairs)
	}
	relay.stop(10 * time.Second)
}
