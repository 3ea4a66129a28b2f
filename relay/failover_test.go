package relay_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/walrelay/walrelay/internal/pgcluster"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/ops"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/relay"
)

// primaryWithStandby starts a primary of its own and a physical standby of it, and
// returns them with a two-host URL that always reaches the one that accepts writes.
func primaryWithStandby(t testing.TB, ctx context.Context, binDir string, standbySettings map[string]string) (primary, standby *pgcluster.Cluster, url string) {
	t.Helper()
	primary, _ = ownCluster(t, binDir, nil)
	standby, err := primary.StartStandby(ctx, "standby1", standbySettings)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { standby.Close() })
	url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write",
		primary.Port(), standby.Port())
	return primary, standby, url
}

// waitReplayed waits until the standby has replayed the primary's WAL up to now.
func waitReplayed(t testing.TB, ctx context.Context, primary, standby *pgx.Conn) {
	t.Helper()
	target := testenv.CurrentLSN(t, primary)
	waitFor(t, time.Minute, "the standby to replay "+target.String(), func() bool {
		var done bool
		err := standby.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn", target.String()).Scan(&done)
		return err == nil && done
	})
}

// A failover to a standby that has no copy of the slot (no failover slots): the
// relay follows the promoted server on its two-host URL, reports the missing slot at
// error level as a failover, counts it, shows it in status, and its catch-up pass
// publishes the rows committed in the gap: nothing is lost.
func TestFailoverWithoutFailoverSlotIsReported(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	primary, standby, url := primaryWithStandby(t, ctx, "", nil)
	broker := testenv.Kafka(t)
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	onPrimary := testenv.Connect(t, primary.URL("postgres"))
	onStandby := testenv.Connect(t, standby.URL("postgres"))

	reg := prometheus.NewRegistry()
	cfg := func(c *config) { c.SlotFailover = false; c.Registry = reg }
	rn := startWithBrokers(t, url, broker.ListenAddrs(), "walrelay", cfg)
	if !rn.waitLog(30*time.Second, "msg=streaming") {
		t.Fatal("the relay did not start streaming")
	}
	var written []outbox.Event
	written = append(written, testenv.WriteTx(t, onPrimary, aggregates("f", 5), "before", 50, false)...)
	if !consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("before the failover: %d of %d delivered", consumer.Distinct(), len(written))
	}
	// Committed and replicated, maybe not yet published when the primary dies.
	written = append(written, testenv.WriteTx(t, onPrimary, aggregates("f", 5), "gap", 50, false)...)
	waitReplayed(t, ctx, onPrimary, onStandby)

	if err := primary.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	written = append(written, testenv.WriteTx(t, onStandby, aggregates("f", 5), "after", 50, false)...)
	if !consumer.WaitDistinct(2*time.Minute, len(written)) {
		t.Fatalf("after the failover: %d of %d delivered", consumer.Distinct(), len(written))
	}
	for _, ev := range written {
		if consumer.Count(ev.ID) == 0 {
			t.Fatalf("event %s (%s) lost", ev.ID, ev.EventType)
		}
	}
	if !rn.waitLog(10*time.Second, "did not survive a failover") {
		t.Error("the missing slot was not reported as a failover")
	}
	if got := testutil.ToFloat64(metricByName(t, reg, "walrelay_slots_replaced_total")); got != 1 {
		t.Errorf("walrelay_slots_replaced_total = %v, want 1", got)
	}
	statusCfg := relay.DefaultConfig()
	statusCfg.DatabaseURL = url
	st, err := ops.ReadStatus(ctx, statusCfg, ops.StatusLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(st.SlotReplacedReason, "failover") || len(st.Problems) == 0 {
		t.Errorf("status does not report the failover: reason %q, problems %v", st.SlotReplacedReason, st.Problems)
	}
	t.Logf("%d events written, %d records delivered (%d again, from the catch-up pass)", len(written),
		len(consumer.Records), len(consumer.Records)-consumer.Distinct())
}

// PostgreSQL 17 with a failover slot: a synchronous standby keeps a copy of the slot
// (sync_replication_slots), the primary dies at once, the standby is promoted, and
// the relay on its two-host URL goes on from the carried-over slot. Nothing is lost,
// no catch-up pass runs, and what comes again is at most what the standby's copy of
// the slot lagged: here the events committed after it last synced.
func TestFailoverSlotFollowsPromotion(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	binDir, err := pgcluster.BinDirFor("17")
	if err != nil {
		needBinaries(t, err)
	}
	primary, standby, url := primaryWithStandby(t, ctx, binDir, map[string]string{"sync_replication_slots": "on"})
	onPrimary := testenv.Connect(t, primary.URL("postgres"))
	onStandby := testenv.Connect(t, standby.URL("postgres"))
	// Synchronous: a commit the application saw is on the standby. The slot never
	// confirms WAL the standby has not received.
	if _, err := onPrimary.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = 'standby'"); err != nil {
		t.Fatal(err)
	}
	if _, err := onPrimary.Exec(ctx, "ALTER SYSTEM SET synchronized_standby_slots = 'standby1'"); err != nil {
		t.Fatal(err)
	}
	if _, err := onPrimary.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	broker := testenv.Kafka(t)
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)

	rn := startWithBrokers(t, url, broker.ListenAddrs(), "walrelay", func(c *config) { c.OnPublish = poller.None })
	if !rn.waitLog(30*time.Second, "msg=streaming") {
		t.Fatal("the relay did not start streaming")
	}
	if !strings.Contains(rn.logs.String(), "failover=true") {
		t.Fatal("the slot was not created as a failover slot")
	}
	var written []outbox.Event
	written = append(written, testenv.WriteTx(t, onPrimary, aggregates("s", 5), "synced", 50, false)...)
	if !consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("before the failover: %d of %d delivered", consumer.Distinct(), len(written))
	}
	confirmed := testenv.CurrentLSN(t, onPrimary)
	waitFor(t, time.Minute, "the primary's slot to confirm "+confirmed.String(), func() bool {
		return testenv.SlotLSN(t, onPrimary, "walrelay") >= confirmed
	})
	waitFor(t, time.Minute, "the standby's copy of the slot to reach "+confirmed.String(), func() bool {
		var ok bool
		err := onStandby.QueryRow(ctx, `SELECT synced AND confirmed_flush_lsn >= $1::text::pg_lsn
			FROM pg_replication_slots WHERE slot_name = 'walrelay'`, confirmed.String()).Scan(&ok)
		return err == nil && ok
	})
	gap := testenv.WriteTx(t, onPrimary, aggregates("s", 5), "gap", 50, false)
	written = append(written, gap...)

	if err := primary.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	written = append(written, testenv.WriteTx(t, onStandby, aggregates("s", 5), "after", 50, false)...)
	if !consumer.WaitDistinct(2*time.Minute, len(written)) {
		t.Fatalf("after the failover: %d of %d delivered", consumer.Distinct(), len(written))
	}
	for _, ev := range written {
		if consumer.Count(ev.ID) == 0 {
			t.Fatalf("event %s (%s) lost", ev.ID, ev.EventType)
		}
	}
	logs := rn.logs.String()
	if n := strings.Count(logs, "created replication slot"); n != 1 {
		t.Errorf("the slot was created %d times; after the promotion the relay must use the carried-over one", n)
	}
	if strings.Contains(logs, "replication slot lost") {
		t.Error("the carried-over slot was reported lost")
	}
	again := len(consumer.Records) - consumer.Distinct()
	t.Logf("%d events written, %d published again after the failover (the standby's copy lagged by at most %d)",
		len(written), again, len(gap))
	if again > len(gap) {
		t.Errorf("%d events published again, more than the %d committed after the standby's copy synced", again, len(gap))
	}
}
