package relay_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
)

// senderTimeout is the throwaway cluster's wal_sender_timeout in the pause test:
// short, so that a pause without status updates would lose the connection.
const senderTimeout = 2 * time.Second

// A relay paused under load publishes nothing committed after the pause, keeps its
// replication connection past wal_sender_timeout, says so on /readyz and
// walrelay_paused, and after the resume publishes every event exactly once.
func TestPauseResumeUnderLoad(t *testing.T) {
	t.Parallel()
	_, dbURL := ownCluster(t, "", map[string]string{"wal_sender_timeout": senderTimeout.String()})
	broker := testenv.Kafka(t)
	reg := prometheus.NewRegistry()
	addr := freeAddr(t)
	rn := start(t, dbURL, broker, "pause", func(c *config) {
		c.Registry, c.MetricsAddr = reg, addr
		c.StatsInterval = 100 * time.Millisecond
	})
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	waitHTTP(t, "http://"+addr+"/readyz", http.StatusOK, "streaming")
	conn := testenv.Connect(t, dbURL)

	w := startWriter(t, dbURL)
	if !consumer.WaitDistinct(time.Minute, 50) {
		t.Fatalf("delivered %d events before the pause, want 50", consumer.Distinct())
	}
	pid := walsenderPID(t, conn, "pause")
	if !rn.relay.Pause() {
		t.Fatal("Pause reported the relay paused already")
	}
	w.paused.Store(true) // events committed from here on must wait for the resume
	waitHTTP(t, "http://"+addr+"/readyz", http.StatusServiceUnavailable, "paused")
	if got := gaugeValue(t, reg, "walrelay_paused"); got != 1 {
		t.Fatalf("walrelay_paused = %v while paused, want 1", got)
	}
	// Paused for three wal_sender_timeouts, consuming all the while.
	consumer.WaitFor(3*senderTimeout, func() bool { return false })
	w.mu.Lock()
	afterPause := len(w.afterPause)
	for _, id := range w.afterPause {
		if consumer.Count(id) > 0 {
			t.Errorf("event %s, committed after the pause, was published while paused", id)
		}
	}
	w.mu.Unlock()
	if afterPause == 0 {
		t.Fatal("the writer committed nothing while the relay was paused")
	}
	if got := walsenderPID(t, conn, "pause"); got != pid {
		t.Fatalf("the slot's walsender changed from pid %d to %d while paused: the connection was lost", pid, got)
	}
	if strings.Contains(rn.logs.String(), "replication session failed") {
		t.Fatal("the replication session failed while paused")
	}

	if !rn.relay.Resume() {
		t.Fatal("Resume reported the relay running already")
	}
	waitHTTP(t, "http://"+addr+"/readyz", http.StatusOK, "streaming")
	if got := gaugeValue(t, reg, "walrelay_paused"); got != 0 {
		t.Fatalf("walrelay_paused = %v after the resume, want 0", got)
	}
	written := w.stop(t)
	if !consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("delivered %d distinct of %d events", consumer.Distinct(), len(written))
	}
	for _, id := range written {
		if n := consumer.Count(id); n != 1 {
			t.Errorf("event %s delivered %d times, want once", id, n)
		}
	}
	if got, want := len(consumer.Records), len(written); got != want {
		t.Fatalf("consumed %d records for %d events", got, want)
	}
}

// writer commits transactions of five events until stopped, and remembers which
// were committed after paused was set.
type writer struct {
	paused atomic.Bool
	quit   chan struct{}
	done   chan error
	mu     sync.Mutex
	all    []string
	// afterPause are the events committed after paused was set.
	afterPause []string
}

func startWriter(t *testing.T, dbURL string) *writer {
	t.Helper()
	conn := testenv.Connect(t, dbURL)
	w := &writer{quit: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		ctx := context.Background()
		for i := 0; ; i++ {
			select {
			case <-w.quit:
				w.done <- nil
				return
			default:
			}
			paused := w.paused.Load()
			ids, err := writeFive(ctx, conn, i)
			if err != nil {
				w.done <- err
				return
			}
			w.mu.Lock()
			w.all = append(w.all, ids...)
			if paused {
				w.afterPause = append(w.afterPause, ids...)
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		select {
		case <-w.quit:
		default:
			close(w.quit)
			<-w.done
		}
	})
	return w
}

// stop ends the writing and returns every event id it committed.
func (w *writer) stop(t *testing.T) []string {
	t.Helper()
	close(w.quit)
	if err := <-w.done; err != nil {
		t.Fatalf("writer: %v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.all
}

func writeFive(ctx context.Context, conn *pgx.Conn, n int) ([]string, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	var ids []string
	for j := 0; j < 5; j++ {
		ev := outbox.Event{AggregateType: "order", AggregateID: fmt.Sprintf("p-%d", j), EventType: "order.paused",
			Payload: []byte(fmt.Sprintf(`{"tx": %d, "n": %d}`, n, j))}
		if err := outbox.Write(ctx, tx, &ev); err != nil {
			return nil, err
		}
		ids = append(ids, ev.ID)
	}
	return ids, tx.Commit(ctx)
}

// A relay started paused publishes nothing until resumed, not even the catch-up
// pass of the slot it creates, then publishes every event, once: those committed
// before the slot (through the pass) and those after (through the stream).
func TestStartPaused(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	before := testenv.WriteTx(t, conn, aggregates("sp", 3), "order.created", 20, false)
	reg := prometheus.NewRegistry()
	addr := freeAddr(t)
	rn := start(t, dbURL, broker, "startpaused", func(c *config) {
		c.Registry, c.MetricsAddr, c.StartPaused = reg, addr, true
	})
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	waitHTTP(t, "http://"+addr+"/readyz", http.StatusServiceUnavailable, "paused")
	if got := gaugeValue(t, reg, "walrelay_paused"); got != 1 {
		t.Fatalf("walrelay_paused = %v when started paused, want 1", got)
	}
	if !rn.waitLog(time.Minute, "paused: the catch-up pass waits for the resume") {
		t.Fatal("the new slot's catch-up pass did not wait for the resume")
	}
	after := testenv.WriteTx(t, conn, aggregates("sp", 3), "order.updated", 20, false)
	// An observation window, not a synchronisation: a relay that publishes would have
	// done so within it many times over.
	consumer.WaitFor(2*time.Second, func() bool { return false })
	if n := len(consumer.Records); n != 0 {
		t.Fatalf("a relay started paused published %d records", n)
	}
	rn.relay.Resume()
	all := append(before, after...)
	if !consumer.WaitDistinct(time.Minute, len(all)) {
		t.Fatalf("delivered %d of %d after the resume", consumer.Distinct(), len(all))
	}
	for _, ev := range all {
		if n := consumer.Count(ev.ID); n != 1 {
			t.Errorf("event %s delivered %d times, want once", ev.ID, n)
		}
	}
}
