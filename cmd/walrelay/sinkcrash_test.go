package main_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
)

// deliveries is what a test's broker or receiver has seen so far: how many times
// each event id arrived, and each aggregate's event ids in order of first arrival.
type deliveries func() (count map[string]int, firsts map[string][]string)

// crashLosesNothing runs the relay binary with env while a writer commits total
// events (transactions of 1 to 60 over 50 aggregates) and SIGKILLs it three times,
// each kill after another quarter has arrived. Then every committed event must have
// arrived, the pending view be empty, and each aggregate's first arrivals be in
// commit order; the repeats the kills cause are logged.
func crashLosesNothing(t *testing.T, sinkName, dbURL, slot string, env []string, total int, delivered deliveries) {
	t.Helper()
	admin := testenv.Connect(t, dbURL)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	const numAggs, kills = 50, 3
	var plan [][]string
	for n := 0; n < total; {
		tx := make([]string, min(1+rng.IntN(60), total-n))
		for j := range tx {
			tx[j] = fmt.Sprintf("agg-%02d", rng.IntN(numAggs))
		}
		plan = append(plan, tx)
		n += len(tx)
	}
	relay := startProc(t, "relay#1", env, "run")
	waitStreaming(t, admin, slot, relay)

	// The writer commits sequentially (commit order is the order it records) and
	// paces itself, so that the kills land while it writes.
	var written []outbox.Event
	writerDone := make(chan error, 1)
	wconn := testenv.Connect(t, dbURL)
	go func() {
		for i, aggs := range plan {
			evs, err := writeTx(context.Background(), wconn, i, aggs)
			if err != nil {
				writerDone <- fmt.Errorf("transaction %d: %w", i, err)
				return
			}
			written = append(written, evs...)
			time.Sleep(5 * time.Millisecond) // load shape, so that the kills land while it writes
		}
		writerDone <- nil
	}()
	distinct := func() int { c, _ := delivered(); return len(c) }
	for k := 1; k <= kills; k++ {
		testenv.WaitFor(t, 2*time.Minute, fmt.Sprintf("%d events arrived before kill %d", k*total/(kills+1), k), func() bool {
			return distinct() >= k*total/(kills+1)
		})
		relay.signal(syscall.SIGKILL)
		if code := relay.wait(10 * time.Second); code != -1 {
			t.Fatalf("relay exited with code %d, want death by SIGKILL", code)
		}
		t.Logf("kill %d with %d events arrived", k, distinct())
		relay = startProc(t, fmt.Sprintf("relay after kill %d", k), env, "run")
	}
	select {
	case err := <-writerDone:
		if err != nil {
			t.Fatalf("writer: %v", err)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the writer did not finish within 3 minutes")
	}
	testenv.WaitFor(t, 2*time.Minute, "every committed event arrived", func() bool { return distinct() >= len(written) })
	testenv.WaitFor(t, 30*time.Second, "the pending view to empty", func() bool {
		var pending int
		if err := admin.QueryRow(context.Background(), "SELECT count(*) FROM outbox_events_pending").Scan(&pending); err != nil {
			t.Fatal(err)
		}
		return pending == 0
	})
	relay.stop(15 * time.Second)

	count, firsts := delivered()
	want := map[string][]string{}
	repeats := 0
	for _, ev := range written {
		want[ev.AggregateID] = append(want[ev.AggregateID], ev.ID)
		switch n := count[ev.ID]; {
		case n == 0:
			t.Errorf("event %s (aggregate %s) lost", ev.ID, ev.AggregateID)
		case n > 1:
			repeats += n - 1
		}
	}
	if len(count) != len(written) {
		t.Errorf("%d distinct events arrived, %d committed", len(count), len(written))
	}
	for agg, ids := range want {
		if got := firsts[agg]; !slices.Equal(got, ids) {
			t.Errorf("aggregate %s: first arrivals differ from commit order (%d arrived, %d committed)", agg, len(got), len(ids))
		}
	}
	t.Logf("%s crash: %d events committed, %d arrived once or more, %d repeats over %d SIGKILLs", sinkName, len(written), len(count), repeats, kills)
}
