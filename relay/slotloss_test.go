package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
)

// A slot invalidated by max_slot_wal_keep_size while the relay is down is detected,
// replaced, and the catch-up pass delivers the rows committed meanwhile. A slot
// dropped under the relay is replaced the same way. A cluster of its own: the small
// max_slot_wal_keep_size would invalidate other tests' slots.
func TestLostSlotIsReplaced(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, dbURL := ownCluster(t, "", map[string]string{
		"max_slot_wal_keep_size": "32MB", "max_wal_size": "64MB", "min_wal_size": "32MB",
	})
	broker := testenv.Kafka(t)
	conn := testenv.Connect(t, dbURL)
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)

	rn := start(t, dbURL, broker, "lossy")
	before := testenv.WriteTx(t, conn, []string{"a"}, "before", 10, false)
	if !consumer.WaitDistinct(time.Minute, len(before)) {
		t.Fatal("events before the loss not delivered")
	}
	rn.stop()

	var during []outbox.Event
	during = append(during, testenv.WriteTx(t, conn, []string{"a", "b"}, "while.lost", 50, false)...)
	if _, err := conn.Exec(ctx, "CREATE TABLE filler (pad text)"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the slot to be invalidated", func() bool {
		if _, err := conn.Exec(ctx, "INSERT INTO filler SELECT repeat(md5(g::text), 30) FROM generate_series(1, 40000) g"); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
			t.Fatal(err)
		}
		var status *string
		if err := conn.QueryRow(ctx, "SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'lossy'").Scan(&status); err != nil {
			t.Fatal(err)
		}
		return status != nil && *status == "lost"
	})

	reg := prometheus.NewRegistry()
	rn = start(t, dbURL, broker, "lossy", func(c *config) { c.Registry = reg })
	if !consumer.WaitDistinct(time.Minute, len(before)+len(during)) {
		t.Fatalf("after the slot was replaced: %d of %d delivered", consumer.Distinct(), len(before)+len(during))
	}
	if !rn.waitLog(10*time.Second, "replication slot lost") {
		t.Error("the lost slot was not logged")
	}
	if got := testutil.ToFloat64(metricByName(t, reg, "walrelay_slots_replaced_total")); got != 1 {
		t.Errorf("walrelay_slots_replaced_total = %v, want 1", got)
	}

	// Dropped under the relay: end its walsender and drop the slot at once.
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'lossy'`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "dropping the slot", func() bool {
		_, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot('lossy')")
		return err == nil
	})
	after := testenv.WriteTx(t, conn, []string{"c"}, "after.drop", 10, false)
	if !consumer.WaitDistinct(time.Minute, len(before)+len(during)+len(after)) {
		t.Fatalf("after the slot was dropped: %d of %d delivered", consumer.Distinct(), len(before)+len(during)+len(after))
	}
	if !rn.waitLog(10*time.Second, "the slot disappeared") {
		t.Error("the dropped slot was not logged as lost")
	}
	if got := testutil.ToFloat64(metricByName(t, reg, "walrelay_slots_replaced_total")); got != 2 {
		t.Errorf("walrelay_slots_replaced_total = %v after the drop, want 2", got)
	}
	rn.stop()

	// With --on-publish none the table cannot close the gap: the log must say so.
	rn = start(t, dbURL, broker, "lossy", func(c *config) { c.OnPublish = poller.None })
	if !rn.waitLog(30*time.Second, "streaming") {
		t.Fatal("the relay did not stream in none mode")
	}
	waitFor(t, 30*time.Second, "dropping the slot in none mode", func() bool {
		_, _ = conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'lossy'`)
		_, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot('lossy')")
		return err == nil
	})
	if !rn.waitLog(30*time.Second, "MAY BE LOST") {
		t.Error("with --on-publish none, the dropped slot was not reported as a possible loss")
	}
}

// metricByName returns the collector-free view of one registered metric for
// testutil.ToFloat64.
func metricByName(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 && f.GetMetric()[0].GetCounter() != nil {
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: "copy"},
				func() float64 { return f.GetMetric()[0].GetCounter().GetValue() })
		}
	}
	t.Fatalf("metric %s not registered", name)
	return nil
}
