package relay_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
)

// A known workload gives known metric values: 120 events acked, one poison event
// too large to send, failing once and counted as the one dead letter, nothing pending, the slot active
// and caught up; /healthz and /readyz answer.
func TestMetricsReflectWorkload(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	reg := prometheus.NewRegistry()
	addr := freeAddr(t)
	start(t, dbURL, broker, "metrics", fastRetries, func(c *config) {
		c.Registry = reg
		c.MetricsAddr = addr
		c.StatsInterval = 100 * time.Millisecond
		c.Retry.MaxAttempts = 2
	})
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	started := time.Now()

	waitHTTP(t, "http://"+addr+"/readyz", http.StatusOK, "streaming")
	var n int
	for i := 0; i < 4; i++ {
		n += len(testenv.WriteTx(t, conn, aggregates("m", 7), "order.created", 30, false))
	}
	tx, err := conn.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	poison := outbox.Event{AggregateType: "order", AggregateID: "p", EventType: "poison",
		Payload: []byte(`{"blob": "` + strings.Repeat("x", 1_100_000) + `"}`)}
	if err := outbox.Write(context.Background(), tx, &poison); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !consumer.WaitDistinct(time.Minute, n) {
		t.Fatalf("delivered %d of %d", consumer.Distinct(), n)
	}

	metric := func(name string) float64 {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == name && len(f.GetMetric()) > 0 {
				m := f.GetMetric()[0]
				switch {
				case m.GetCounter() != nil:
					return m.GetCounter().GetValue()
				case m.GetGauge() != nil:
					return m.GetGauge().GetValue()
				case m.GetHistogram() != nil:
					return float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
		return -1
	}
	waitFor(t, 30*time.Second, "one dead letter in the metrics", func() bool { return metric("walrelay_dead_letters") == 1 })
	waitFor(t, 30*time.Second, "nothing pending", func() bool { return metric("walrelay_queued_events") == 0 && metric("outbox_events_pending") == 0 })

	if got := metric("outbox_events_published_total"); got != float64(n) {
		t.Errorf("outbox_events_published_total = %v, want %d", got, n)
	}
	if got := metric("walrelay_commit_to_ack_seconds"); got != float64(n) {
		t.Errorf("walrelay_commit_to_ack_seconds observations = %v, want %d", got, n)
	}
	if err := testutil.CollectAndCompare(reg, strings.NewReader(`
# HELP outbox_events_failed_total Failed publish attempts, by event type.
# TYPE outbox_events_failed_total counter
outbox_events_failed_total{event_type="poison"} 1
# HELP walrelay_dead_lettered_events_total Events this relay made dead letters, by outbox table: after their last attempt, or at once when no attempt can succeed (each is logged at ERROR).
# TYPE walrelay_dead_lettered_events_total counter
walrelay_dead_lettered_events_total{table="public.outbox_events"} 1
# HELP walrelay_leader 1 while this instance streams the slot (or polls, in poll mode).
# TYPE walrelay_leader gauge
walrelay_leader 1
# HELP walrelay_inflight_events Events handed to the broker and not yet settled.
# TYPE walrelay_inflight_events gauge
walrelay_inflight_events 0
# HELP walrelay_slot_active 1 when a process streams the slot.
# TYPE walrelay_slot_active gauge
walrelay_slot_active{slot="metrics"} 1
`), "outbox_events_failed_total", "walrelay_dead_lettered_events_total", "walrelay_leader", "walrelay_inflight_events", "walrelay_slot_active"); err != nil {
		t.Error(err)
	}
	if got := metric("walrelay_confirmed_lsn"); got <= 0 {
		t.Errorf("walrelay_confirmed_lsn = %v, want the confirmed position", got)
	}
	waitFor(t, 30*time.Second, "the time events were last confirmed", func() bool {
		return metric("walrelay_events_confirmed_timestamp_seconds") >= float64(started.Unix())
	})
	if got := metric("walrelay_build_info"); got != 1 {
		t.Errorf("walrelay_build_info = %v, want 1", got)
	}
	if got := metric("outbox_batch_duration_seconds"); got < 1 {
		t.Errorf("outbox_batch_duration_seconds has %v observations, want some", got)
	}
	waitHTTP(t, "http://"+addr+"/healthz", http.StatusOK, "ok")
	body := waitHTTP(t, "http://"+addr+"/metrics", http.StatusOK, "outbox_events_published_total")
	for _, name := range []string{"walrelay_slot_confirmed_lag_bytes", "walrelay_slot_wal_status", "walrelay_stalled"} {
		if !strings.Contains(body, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

// An idle outbox on a busy database does not pin WAL: after 200 MB of WAL written to
// another table, the slot's lag comes back under a small bound on its own. Those
// confirmations move walrelay_last_confirm_timestamp_seconds, and not
// walrelay_events_confirmed_timestamp_seconds: no event was in them.
func TestIdleSlotFollowsBusyDatabase(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	reg := prometheus.NewRegistry()
	rn := start(t, dbURL, broker, "idle", func(c *config) { c.Registry = reg })
	if !rn.waitLog(30*time.Second, "msg=streaming") { // the warm-up event is the stream's, not a catch-up pass's
		t.Fatal("the relay did not start streaming")
	}
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	if !consumer.WaitDistinct(time.Minute, len(testenv.WriteTx(t, conn, []string{"i"}, "warm", 1, false))) {
		t.Fatal("warm-up event not delivered")
	}
	waitFor(t, 30*time.Second, "the warm-up event confirmed", func() bool {
		return gaugeValue(t, reg, "walrelay_events_confirmed_timestamp_seconds") > 0
	})
	eventsConfirmed := gaugeValue(t, reg, "walrelay_events_confirmed_timestamp_seconds")
	lastConfirm := gaugeValue(t, reg, "walrelay_last_confirm_timestamp_seconds")
	ctx := context.Background()
	if _, err := conn.Exec(ctx, "CREATE TABLE busy (id bigint, pad text)"); err != nil {
		t.Fatal(err)
	}
	before := testenv.CurrentLSN(t, conn)
	for i := 0; i < 10; i++ { // about 200 MB of WAL, in 10 transactions
		if _, err := conn.Exec(ctx, "INSERT INTO busy SELECT g, repeat(md5(g::text), 30) FROM generate_series(1, 180000) g"); err != nil {
			t.Fatal(err)
		}
	}
	written := testenv.CurrentLSN(t, conn) - before
	if written < 200<<20 {
		t.Fatalf("wrote only %d MB of WAL", written>>20)
	}
	const bound = 16 << 20 // other tests write WAL to the same cluster meanwhile
	waitFor(t, time.Minute, fmt.Sprintf("slot lag under %d MB after %d MB of WAL", bound>>20, written>>20), func() bool {
		var lag int64
		if err := conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint
			FROM pg_replication_slots WHERE slot_name = 'idle'`).Scan(&lag); err != nil {
			t.Fatal(err)
		}
		return lag < bound
	})
	if got := gaugeValue(t, reg, "walrelay_last_confirm_timestamp_seconds"); got <= lastConfirm {
		t.Errorf("walrelay_last_confirm_timestamp_seconds did not move (%v) while the slot followed the server", got)
	}
	if got := gaugeValue(t, reg, "walrelay_events_confirmed_timestamp_seconds"); got != eventsConfirmed {
		t.Errorf("walrelay_events_confirmed_timestamp_seconds moved from %v to %v with no event confirmed", eventsConfirmed, got)
	}
}

// With heartbeats on, the relay keeps streaming and confirming while the outbox is
// idle, and the heartbeat messages it writes into the WAL publish nothing. (The
// cluster is shared with other tests, so this cannot show that the heartbeat alone
// moved the slot.)
func TestHeartbeatAdvancesSlot(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	start(t, dbURL, broker, "heartbeat", func(c *config) { c.HeartbeatInterval = 200 * time.Millisecond })
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	if !consumer.WaitDistinct(time.Minute, len(testenv.WriteTx(t, conn, []string{"h"}, "warm", 1, false))) {
		t.Fatal("warm-up event not delivered")
	}
	mark := testenv.CurrentLSN(t, conn)
	waitFor(t, 30*time.Second, "slot confirmed past the LSN at the start of the idle period", func() bool {
		return testenv.SlotLSN(t, conn, "heartbeat") > mark
	})
	var beats int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM outbox_events").Scan(&beats); err != nil {
		t.Fatal(err)
	}
	if beats != 1 || len(consumer.Records) != 1 {
		t.Fatalf("heartbeats showed up as events: %d rows, %d records", beats, len(consumer.Records))
	}
}

// waitHTTP polls url until it answers with the status and a body containing want.
func waitHTTP(t *testing.T, url string, status int, want string) string {
	t.Helper()
	var last string
	ok := pollUntil(30*time.Second, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			last = err.Error()
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		last = fmt.Sprintf("%d %s", resp.StatusCode, b)
		return resp.StatusCode == status && strings.Contains(string(b), want)
	})
	if !ok {
		t.Fatalf("%s: want %d with %q, last answer: %.300s", url, status, want, last)
	}
	return last
}

var (
	waitFor   = testenv.WaitFor
	pollUntil = testenv.Eventually
	freeAddr  = testenv.FreeAddr
)

// A relay whose slot lag grows while its confirmed LSN stands still is stalled: the
// gauge says so, /readyz fails and an error is logged; all of it clears once events
// flow again.
func TestStallDetection(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	broker := testenv.Kafka(t)
	reg := prometheus.NewRegistry()
	addr := freeAddr(t)
	rn := start(t, dbURL, broker, "stall", func(c *config) {
		c.Registry, c.MetricsAddr = reg, addr
		c.StatsInterval = 100 * time.Millisecond
		c.StallTimeout = time.Second
	})
	waitHTTP(t, "http://"+addr+"/readyz", http.StatusOK, "streaming")

	fault := broker.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotEnoughReplicas, Count: -1})
	// Keep the WAL, and so the lag, growing.
	defer testenv.KeepWriting(testenv.Connect(t, dbURL), `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
		SELECT 'order', 'st', 'stuck', jsonb_build_object('pad', repeat('x', 500)) FROM generate_series(1, 50)`)()
	waitHTTP(t, "http://"+addr+"/readyz", http.StatusServiceUnavailable, "stalled")
	if got := testutil.ToFloat64(gauge(t, reg, "walrelay_stalled")); got != 1 {
		t.Fatalf("walrelay_stalled = %v, want 1", got)
	}
	if !rn.waitLog(5*time.Second, "relay stalled") {
		t.Fatal("no error logged for the stall")
	}
	fault.Remove()
	waitHTTP(t, "http://"+addr+"/readyz", http.StatusOK, "streaming")
}
