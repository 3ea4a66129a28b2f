package main_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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

// TestCrashWhileBatching kills the relay with SIGKILL while it batches, at a moderate
// rate: reads coalesced by the replication socket's low-water mark (read batching on,
// as its debug log says) and records lingering in the producer. Before the kill the
// broker refuses every produce request for a while: no event of that time is acked,
// so the slot's confirmed position must not pass the LSN from before it, however many
// transactions the relay has read meanwhile; and the events never acked are lost
// unless the next relay streams them again. After the restart every committed event
// is delivered, first deliveries in commit order per aggregate.
func TestCrashWhileBatching(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	kafka := testenv.Kafka(t)
	var refusing atomic.Bool
	kafka.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		kafka.KeepControl()
		if refusing.Load() {
			return nil, errors.New("refused by the test"), true // closes the connection: no ack
		}
		return nil, nil, false
	})
	brokers := kafka.ListenAddrs()
	slot := slotName(t, "")
	admin := testenv.Connect(t, dbURL)
	env := relayEnv(dbURL, brokers, "WALRELAY_LOG_LEVEL=debug")
	args := []string{"run", "--slot", slot, "--status-interval", "100ms"}

	first := startProc(t, "relay#1", env, args...)
	waitStreaming(t, admin, slot, first)
	consumer := testenv.NewConsumer(t, brokers, `outbox\..*`)

	// Writers commit single-event transactions as fast as they can, with payloads
	// large enough (3 KiB) that the stream's bytes come at a batching rate on a busy
	// machine too. Each owns its aggregates, so its commit order is theirs.
	const writers, aggsPerWriter = 4, 10
	ctx, cancel := context.WithCancel(context.Background())
	stop := make(chan struct{})
	var committed atomic.Int64
	written := make([][]outbox.Event, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		conn := testenv.Connect(t, dbURL)
		wg.Add(1)
		go func() {
			defer wg.Done()
			payload := fmt.Sprintf(`{"pad": %q}`, strings.Repeat("p", 3<<10))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ev := outbox.Event{AggregateType: "order", AggregateID: fmt.Sprintf("agg-%d-%d", w, i%aggsPerWriter),
					EventType: "order_updated", Payload: []byte(payload)}
				if err := writeOne(ctx, conn, &ev); err != nil {
					errs[w] = fmt.Errorf("writer %d, event %d: %w", w, i, err)
					return
				}
				written[w] = append(written[w], ev)
				committed.Add(1)
			}
		}()
	}
	stopWriters := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(func() { cancel(); stopWriters() }) // before the connections close

	batching := func() bool {
		out := first.output.String()
		return strings.LastIndex(out, `msg="read batching" on=true`) > strings.LastIndex(out, `msg="read batching" on=false`)
	}
	testenv.WaitFor(t, 60*time.Second, "read batching to turn on under the load", func() bool {
		return first.exited() || batching()
	})
	if !consumer.WaitDistinct(60*time.Second, 200) {
		t.Fatalf("consumed %d distinct events of %d committed", consumer.Distinct(), committed.Load())
	}

	// The broker refuses from here on. Every event committed after refusedFrom is in
	// a produce request sent after that, so none is acked; once a few hundred were
	// committed, their LSNs are all above the slot's, and stay so.
	refusing.Store(true)
	from := committed.Load()
	testenv.WaitFor(t, 30*time.Second, "writers to commit while the broker refuses", func() bool {
		return committed.Load() >= from+200
	})
	refusedFrom := testenv.CurrentLSN(t, admin)
	from = committed.Load()
	var maxConfirmed pglogrepl.LSN
	testenv.WaitFor(t, 30*time.Second, "more commits while the broker refuses", func() bool {
		if c := testenv.SlotLSN(t, admin, slot); c > maxConfirmed {
			maxConfirmed = c
		}
		return committed.Load() >= from+500
	})
	if maxConfirmed > refusedFrom {
		t.Errorf("the slot was confirmed to %s while the broker acked nothing after %s: confirmation ran ahead of acks",
			maxConfirmed, refusedFrom)
	}
	// The mode follows the rate, which a busy machine makes uneven: kill the relay
	// at a moment its log says batching is on.
	testenv.WaitFor(t, 30*time.Second, "read batching to be on when the relay is killed", batching)
	first.signal(syscall.SIGKILL)
	if code := first.wait(10 * time.Second); code != -1 {
		t.Fatalf("relay#1 exited with code %d, want death by SIGKILL", code)
	}
	atKill := committed.Load()
	refusing.Store(false)

	// The writers go on while the relay is down and after it is back.
	second := startProc(t, "relay#2", env, args...)
	testenv.WaitFor(t, 60*time.Second, "writers to commit after the restart", func() bool {
		return committed.Load() >= atKill+500
	})
	stopWriters()
	var all []outbox.Event
	for w := range writers {
		if errs[w] != nil {
			t.Fatal(errs[w])
		}
		all = append(all, written[w]...)
	}
	if !consumer.WaitFor(120*time.Second, func() bool {
		for _, ev := range all {
			if consumer.Count(ev.ID) == 0 {
				return false
			}
		}
		return true
	}) {
		t.Errorf("not every committed event was delivered within 120s")
	}
	second.stop(15 * time.Second)
	lost, unknown := checkDeliveries(t, consumer, all)
	t.Logf("written %d events (%d when killed), delivered %d records (%d distinct), lost %d, unknown %d; confirmed at most %s while refused from %s",
		len(all), atKill, len(consumer.Records), consumer.Distinct(), lost, unknown, maxConfirmed, refusedFrom)
}

// writeOne writes ev in a transaction of its own.
func writeOne(ctx context.Context, conn *pgx.Conn, ev *outbox.Event) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	if err := outbox.Write(ctx, tx, ev); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
