package main_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
)

// TestGracefulStop: SIGTERM after everything was delivered exits 0 within the
// shutdown timeout, and the slot was confirmed past the last transaction, so that a
// restarted relay delivers nothing twice.
func TestGracefulStop(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	kafka := testenv.Kafka(t)
	brokers := kafka.ListenAddrs()
	slot := slotName(t, "")
	conn := testenv.Connect(t, dbURL)
	const shutdownTimeout = 5 * time.Second
	env := relayEnv(dbURL, brokers)
	// Status updates are rare, so what the slot confirms by the end is the work of the
	// final status update a graceful stop sends.
	args := []string{"run", "--slot", slot, "--shutdown-timeout", shutdownTimeout.String(),
		"--status-interval", "30s", "--keepalive-interval", "30s"}

	first := startProc(t, "relay#1", env, args...)
	waitStreaming(t, conn, slot, first)
	consumer := testenv.NewConsumer(t, brokers, `outbox\..*`)

	aggs := make([]string, 10)
	for i := range aggs {
		aggs[i] = fmt.Sprintf("order-%d", i)
	}
	var ids []string
	var beforeLast pglogrepl.LSN
	for i := 0; i < 10; i++ {
		if i == 9 {
			// The last transaction commits after this position, so a slot confirmed
			// past it has confirmed that transaction.
			beforeLast = testenv.CurrentLSN(t, conn)
		}
		for _, ev := range testenv.WriteTx(t, conn, aggs, "order_created", 50, false) {
			ids = append(ids, ev.ID)
		}
	}
	rolledBack := testenv.WriteTx(t, conn, aggs, "order_cancelled", 5, true)
	afterLast := testenv.CurrentLSN(t, conn)

	if !consumer.WaitDistinct(60*time.Second, len(ids)) {
		t.Fatalf("consumed %d distinct events of %d", consumer.Distinct(), len(ids))
	}
	t.Logf("slot confirmed %s before SIGTERM", testenv.SlotLSN(t, conn, slot))
	took := first.stop(shutdownTimeout + 5*time.Second)
	t.Logf("relay stopped %s after SIGTERM", took.Round(time.Millisecond))
	if took > shutdownTimeout {
		t.Errorf("the relay took %s to stop, more than its shutdown timeout %s, with nothing in flight", took, shutdownTimeout)
	}

	var confirmed pglogrepl.LSN
	if !poll(10*time.Second, func() bool {
		confirmed = testenv.SlotLSN(t, conn, slot)
		return confirmed > beforeLast
	}) {
		t.Fatalf("slot confirmed %s after the stop, not past the last transaction (commit after %s)", confirmed, beforeLast)
	}
	t.Logf("confirmed_flush_lsn %s; WAL position after the last commit %s", confirmed, afterLast)

	// Restart and write one marker per aggregate: each lands in its aggregate's
	// partition after anything the new relay could deliver again, so once every
	// marker is in, no earlier event came twice.
	second := startProc(t, "relay#2", env, args...)
	waitStreaming(t, conn, slot, second)
	markers := testenv.WriteTx(t, conn, aggs, "marker", len(aggs), false)
	if !consumer.WaitFor(60*time.Second, func() bool {
		for _, m := range markers {
			if consumer.Count(m.ID) == 0 {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("markers not delivered after the restart")
	}
	for _, id := range ids {
		if n := consumer.Count(id); n != 1 {
			t.Errorf("event %s delivered %d times, want once", id, n)
		}
	}
	for _, ev := range rolledBack {
		if n := consumer.Count(ev.ID); n != 0 {
			t.Errorf("rolled-back event %s delivered %d times", ev.ID, n)
		}
	}
	if got, want := len(consumer.Records), len(ids)+len(markers); got != want {
		t.Errorf("consumed %d records, want %d", got, want)
	}
	second.stop(shutdownTimeout + 5*time.Second)
}

// TestCrashLosesNothing kills the relay with SIGKILL in the middle of a stream of
// transactions and starts it again: every committed event, row or table-less, is
// delivered, none that was not committed is, and the first deliveries of each
// aggregate keep commit order.
func TestCrashLosesNothing(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	kafka := testenv.Kafka(t)
	// The broker answers each produce request 50ms late, as a real one with acks=all
	// takes its time: at every moment committed events are waiting for their acks, which
	// the relay must not confirm to PostgreSQL, and which the kill catches in flight.
	kafka.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		kafka.SleepControl(func() { time.Sleep(50 * time.Millisecond) }) // broker latency
		return nil, nil, false
	})
	brokers := kafka.ListenAddrs()
	slot := slotName(t, "")
	admin := testenv.Connect(t, dbURL)
	env := relayEnv(dbURL, brokers)
	args := []string{"run", "--slot", slot, "--status-interval", "100ms"}

	// The plan: transactions of 1..60 events over 50 aggregates.
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	const txns, numAggs = 120, 50
	plan := make([][]string, txns) // aggregate of each event, per transaction
	total := 0
	for i := range plan {
		plan[i] = make([]string, 1+rng.IntN(60))
		for j := range plan[i] {
			plan[i][j] = fmt.Sprintf("agg-%02d", rng.IntN(numAggs))
		}
		total += len(plan[i])
	}
	t.Logf("seed %d: %d transactions, %d events", seed, txns, total)

	first := startProc(t, "relay#1", env, args...)
	waitStreaming(t, admin, slot, first)
	consumer := testenv.NewConsumer(t, brokers, `outbox\..*`)

	// The writer commits sequentially, so the order it records is commit order. It
	// paces itself (a load shape, not synchronisation) so that the relay streams while
	// it writes, and it does not pass three quarters of the plan before the relay was
	// killed: the kill (at a quarter consumed) lands mid-stream, and the writer goes on
	// while the relay is down and after it is back.
	gate := txns * 3 / 4
	killed := make(chan struct{})
	writerDone := make(chan struct{})
	var written []outbox.Event
	var writerErr error
	var nWritten atomic.Int64
	wconn := testenv.Connect(t, dbURL)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(writerDone)
		pace := time.NewTicker(15 * time.Millisecond)
		defer pace.Stop()
		for i, aggs := range plan {
			select {
			case <-pace.C:
			case <-ctx.Done():
				writerErr = ctx.Err()
				return
			}
			if i == gate {
				select {
				case <-killed:
				case <-ctx.Done():
					writerErr = ctx.Err()
					return
				}
			}
			evs, err := writeTx(ctx, wconn, i, aggs)
			if err != nil {
				writerErr = fmt.Errorf("transaction %d: %w", i, err)
				return
			}
			written = append(written, evs...)
			nWritten.Add(int64(len(evs)))
		}
	}()
	t.Cleanup(func() { cancel(); <-writerDone }) // before wconn closes

	if !consumer.WaitDistinct(60*time.Second, total/4) {
		t.Fatalf("consumed %d distinct events of %d written before the kill", consumer.Distinct(), nWritten.Load())
	}
	seenAtKill, writtenAtKill := consumer.Distinct(), nWritten.Load()
	first.signal(syscall.SIGKILL)
	if code := first.wait(10 * time.Second); code != -1 {
		t.Fatalf("relay#1 exited with code %d, want death by SIGKILL", code)
	}
	close(killed)
	t.Logf("killed relay#1 with %d events consumed, %d committed", seenAtKill, writtenAtKill)
	horizonAtKill := publishedHorizon(t, admin, slot)

	second := startProc(t, "relay#2", env, args...)
	select {
	case <-writerDone:
	case <-time.After(2 * time.Minute):
		t.Fatalf("writer did not finish within 2 minutes (%d events written)", nWritten.Load())
	}
	if writerErr != nil {
		t.Fatalf("writer: %v", writerErr)
	}
	if len(written) != total {
		t.Fatalf("wrote %d events, planned %d", len(written), total)
	}

	if !consumer.WaitFor(90*time.Second, func() bool {
		if consumer.Distinct() < len(written) {
			return false
		}
		for _, ev := range written {
			if consumer.Count(ev.ID) == 0 {
				return false
			}
		}
		return true
	}) {
		t.Errorf("not every committed event was delivered within 90s")
	}
	// The default, --on-publish progress: the killed relay's horizon stands, and
	// the next one moves it on until nothing is pending.
	testenv.WaitFor(t, 30*time.Second, "the pending view to empty", func() bool {
		if h := publishedHorizon(t, admin, slot); h < horizonAtKill {
			t.Fatalf("published horizon moved back from %d to %d", horizonAtKill, h)
		}
		var pending int
		if err := admin.QueryRow(context.Background(), "SELECT count(*) FROM outbox_events_pending").Scan(&pending); err != nil {
			t.Fatal(err)
		}
		return pending == 0
	})
	second.stop(15 * time.Second)

	lost, unknown := checkDeliveries(t, consumer, written)

	duplicates := len(consumer.Records) - consumer.Distinct()
	t.Logf("crash summary: written %d, delivered %d records (%d distinct), duplicates %d, lost %d, unknown %d; killed at %d consumed / %d committed",
		len(written), len(consumer.Records), consumer.Distinct(), duplicates, lost, unknown, seenAtKill, writtenAtKill)
}

// checkDeliveries checks what the consumer got against the events written, in commit
// order: every event delivered, none unknown, each on its aggregate's key, topic
// outbox.event.order and one partition per aggregate, and the first deliveries of
// each aggregate in commit order. It returns the lost and unknown counts.
func checkDeliveries(t *testing.T, consumer *testenv.Consumer, written []outbox.Event) (lost, unknown int) {
	t.Helper()
	// Nothing lost, nothing unknown.
	want := make(map[string]outbox.Event, len(written))
	for _, ev := range written {
		want[ev.ID] = ev
	}
	for _, ev := range written {
		if consumer.Count(ev.ID) == 0 {
			lost++
			if lost <= 10 {
				t.Errorf("lost event %s (aggregate %s)", ev.ID, ev.AggregateID)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d committed events lost", lost, len(written))
	}

	// Per aggregate: the order of first deliveries is commit order. An aggregate's
	// records are in one partition, and the consumer appends each partition's
	// records in offset order.
	wantOrder := map[string][]string{}
	for _, ev := range written {
		wantOrder[ev.AggregateID] = append(wantOrder[ev.AggregateID], ev.ID)
	}
	gotOrder := map[string][]string{}
	seen := map[string]bool{}
	partition := map[string]int32{}
	for _, r := range consumer.Records {
		id := testenv.Header(r, "id")
		ev, ok := want[id]
		if !ok {
			if unknown++; unknown <= 10 {
				t.Errorf("unknown event %q consumed (topic %s, key %s)", id, r.Topic, r.Key)
			}
			continue
		}
		if string(r.Key) != ev.AggregateID || testenv.Header(r, "aggregate_id") != ev.AggregateID {
			t.Errorf("event %s: key %q, aggregate_id header %q, want %q", id, r.Key, testenv.Header(r, "aggregate_id"), ev.AggregateID)
		}
		if r.Topic != "outbox.event.order" {
			t.Errorf("event %s on topic %s, want outbox.event.order", id, r.Topic)
		}
		if p, ok := partition[ev.AggregateID]; ok && p != r.Partition {
			t.Errorf("aggregate %s on partitions %d and %d", ev.AggregateID, p, r.Partition)
		}
		partition[ev.AggregateID] = r.Partition
		if !seen[id] {
			seen[id] = true
			gotOrder[ev.AggregateID] = append(gotOrder[ev.AggregateID], id)
		}
	}
	for agg, ids := range wantOrder {
		got := gotOrder[agg]
		if !slices.Equal(got, ids) {
			i := 0
			for i < len(got) && i < len(ids) && got[i] == ids[i] {
				i++
			}
			t.Errorf("aggregate %s: first deliveries differ from commit order at position %d of %d (got %d deliveries)",
				agg, i, len(ids), len(got))
		}
	}

	return lost, unknown
}

// writeTx writes one event per aggregate in aggs in one transaction and commits it,
// every third one as a table-less event (outbox.Emit), the others as rows. Unlike
// testenv.WriteTx it reports errors, for use off the test goroutine.
func writeTx(ctx context.Context, conn *pgx.Conn, txn int, aggs []string) ([]outbox.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.Background())
	events := make([]outbox.Event, len(aggs))
	for i, agg := range aggs {
		events[i] = outbox.Event{AggregateType: "order", AggregateID: agg, EventType: "order_updated",
			Payload: []byte(fmt.Sprintf(`{"txn": %d, "n": %d, "note": %q}`, txn, i, strings.Repeat("x", i)))}
		write := outbox.Write
		if (txn+i)%3 == 2 {
			write = outbox.Emit // a table-less event among the rows, in the same order
		}
		if err := write(ctx, tx, &events[i]); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	return events, nil
}

// publishedHorizon is the slot's recorded published horizon (0: none yet).
func publishedHorizon(t *testing.T, conn *pgx.Conn, slot string) int64 {
	t.Helper()
	var xid *int64
	if err := conn.QueryRow(context.Background(), "SELECT max(published_xid::text::bigint) FROM walrelay_progress WHERE slot_name = $1",
		slot).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	if xid == nil {
		return 0
	}
	return *xid
}
