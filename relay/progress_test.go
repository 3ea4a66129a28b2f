package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/ops"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/relay"
)

// unpublished is the condition of a row of table not yet published, in any
// --on-publish mode (what the <table>_pending view lists).
func unpublished(table string) string {
	return "NOT walrelay_published(xmin, processed_at, retry_after, dead_lettered_at, (SELECT walrelay_horizon('" + table + "'::regclass)), (SELECT walrelay_next_xid()))"
}

// retirePublished runs the progress mode's retirement of outbox_events once, as the
// relay's cleanup does, and returns how many rows it deleted.
func retirePublished(t *testing.T, dbURL string, olderThan time.Duration, batch int) int64 {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	deleted, err := poller.NewStore(pool, catalog.DefaultShape("outbox_events"), poller.DefaultPolicy()).
		DeletePublished(ctx, olderThan, batch)
	if err != nil {
		t.Fatal(err)
	}
	return deleted
}

// count runs a count query.
func count(t testing.TB, conn *pgx.Conn, query string, args ...any) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// The stream's default, --on-publish progress, publishes every event without
// writing to its row: processed_at stays NULL, while the pending view and walrelay
// status empty once the published horizon covers the rows.
func TestProgressIsTheStreamDefault(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	reg := prometheus.NewRegistry()
	startedAt := time.Now()
	rn := start(t, dbURL, broker, "progress_default", func(c *config) {
		c.ProgressInterval = 100 * time.Millisecond
		c.Registry = reg
	})
	if !rn.waitLog(30*time.Second, "streaming") {
		t.Fatal("the relay did not stream")
	}
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	var n int
	for range 4 {
		n += len(testenv.WriteTx(t, conn, aggregates("pd", 10), "e", 50, false))
	}
	if !consumer.WaitDistinct(time.Minute, n) {
		t.Fatalf("delivered %d of %d", consumer.Distinct(), n)
	}
	waitFor(t, 30*time.Second, "the pending view to empty", func() bool {
		return count(t, conn, "SELECT count(*) FROM outbox_events_pending") == 0
	})
	rn.stop()
	// The gauge the horizon alert (deploy/prometheus/alerts.yml) watches.
	if at := gaugeValue(t, reg, "walrelay_published_horizon_timestamp_seconds"); at < float64(startedAt.Unix()) {
		t.Errorf("walrelay_published_horizon_timestamp_seconds = %v, want a time after the relay started (%d)", at, startedAt.Unix())
	}
	if got := count(t, conn, "SELECT count(*) FROM outbox_events WHERE processed_at IS NOT NULL OR attempts > 0"); got != 0 {
		t.Errorf("%d rows written to by the relay, want none", got)
	}
	if got := count(t, conn, "SELECT count(*) FROM outbox_events"); got != n {
		t.Errorf("%d rows in the table, want %d", got, n)
	}
	if got := count(t, conn, `SELECT count(*) FROM walrelay_progress p JOIN walrelay_slots s USING (slot_name)
		WHERE slot_name = 'progress_default' AND p.slot_created_at = s.created_at`); got != 1 {
		t.Errorf("%d published horizons of the slot's incarnation, want 1", got)
	}
	cfg := relay.DefaultConfig()
	cfg.DatabaseURL, cfg.Slot = dbURL, "progress_default"
	st, err := ops.ReadStatus(context.Background(), cfg, ops.StatusLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if st.PendingRows != 0 || st.PublishedHorizonAt == nil {
		t.Errorf("status: %d pending rows, horizon recorded at %v; want 0 and a time", st.PendingRows, st.PublishedHorizonAt)
	}
	// A row committed now is pending until a relay publishes it.
	testenv.WriteTx(t, conn, []string{"later"}, "e", 1, false)
	if got := count(t, conn, "SELECT count(*) FROM outbox_events_pending"); got != 1 {
		t.Errorf("%d rows pending after one more insert, want 1", got)
	}
}

// A slot lost in progress mode: the catch-up pass publishes the rows committed after
// the published horizon the lost slot recorded, and only those; nothing is lost.
func TestProgressSlotLossRepublishesOnlyPastTheHorizon(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	fast := func(c *config) { c.ProgressInterval = 100 * time.Millisecond }

	rn := start(t, dbURL, broker, "progress_loss", fast)
	if !rn.waitLog(30*time.Second, "streaming") {
		t.Fatal("the relay did not stream")
	}
	before := testenv.WriteTx(t, conn, aggregates("pl", 5), "before", 100, false)
	if !consumer.WaitDistinct(time.Minute, len(before)) {
		t.Fatal("events before the loss not delivered")
	}
	waitFor(t, 30*time.Second, "the horizon to cover the rows", func() bool {
		return count(t, conn, "SELECT count(*) FROM outbox_events_pending") == 0
	})
	rn.stop()

	during := testenv.WriteTx(t, conn, aggregates("pl", 5), "while.lost", 40, false)
	dropSlot(t, conn, "progress_loss") // once the stopped relay's walsender has let go of it
	if got := count(t, conn, "SELECT count(*) FROM outbox_events_pending"); got != len(during) {
		t.Fatalf("%d rows pending while the slot is lost, want the %d committed after the horizon", got, len(during))
	}

	rn = start(t, dbURL, broker, "progress_loss", fast)
	if !consumer.WaitDistinct(time.Minute, len(before)+len(during)) {
		t.Fatalf("after the slot was replaced: %d of %d delivered", consumer.Distinct(), len(before)+len(during))
	}
	if !rn.waitLog(10*time.Second, "catch-up pass done") {
		t.Fatal("no catch-up pass")
	}
	for _, ev := range before {
		if got := consumer.Count(ev.ID); got != 1 {
			t.Fatalf("event %s, published before the horizon, delivered %d times, want once", ev.ID, got)
		}
	}
	for _, ev := range during {
		if got := consumer.Count(ev.ID); got != 1 {
			t.Fatalf("event %s, committed while the slot was lost, delivered %d times, want once", ev.ID, got)
		}
	}
	// The pass marks its rows; the new slot's horizon covers the rest.
	if got := count(t, conn, "SELECT count(*) FROM outbox_events WHERE processed_at IS NOT NULL"); got != len(during) {
		t.Errorf("%d rows marked, want the pass's %d", got, len(during))
	}
	waitFor(t, 30*time.Second, "the pending view to empty after the pass", func() bool {
		return count(t, conn, "SELECT count(*) FROM outbox_events_pending") == 0
	})
}

// Retirement in progress mode deletes the rows older than the retention that the
// horizon covers, and nothing else: not the new ones, not those committed after the
// horizon, not handed-over rows or dead letters.
func TestRetirementDeletesOnlyPublishedRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	insert := func(kind, created string, retry, dead bool) {
		t.Helper()
		if _, err := conn.Exec(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at, retry_after, attempts, dead_lettered_at)
			SELECT 'order', 'a' || i, $1, '{}', now() - $2::interval, CASE WHEN $3 THEN now() END, CASE WHEN $3 OR $4 THEN 3 ELSE 0 END,
				CASE WHEN $4 THEN now() END
			FROM generate_series(1, 2500) i`, kind, created, retry, dead); err != nil {
			t.Fatal(err)
		}
	}
	insert("old.published", "8 days", false, false)
	insert("new.published", "1 day", false, false)
	insert("old.retrying", "8 days", true, false)
	insert("old.dead", "8 days", false, true)
	// The horizon: taken, as a relay would once it confirmed past these rows, when no
	// transaction older than them is still open. The cluster is shared with tests
	// running in parallel, whose open transactions hold the snapshot's xmin back.
	awaitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := catalog.AwaitOlderTransactions(awaitCtx, conn, func(left int) { t.Logf("waiting for %d older transactions", left) }); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO walrelay_slots (slot_name, catchup_done_at) VALUES ('retire', now())`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO walrelay_table_slots (table_oid, slot_name, covered_at)
		VALUES ('outbox_events'::regclass, 'retire', now())`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO walrelay_progress (slot_name, table_oid, slot_created_at, published_xid, confirmed_lsn,
			system_id, database_oid)
		SELECT 'retire', 'outbox_events'::regclass, created_at, pg_snapshot_xmin(pg_current_snapshot()), pg_current_wal_insert_lsn(),
			walrelay_system_id(), walrelay_database_oid()
		FROM walrelay_slots WHERE slot_name = 'retire'`); err != nil {
		t.Fatal(err)
	}
	insert("old.after.horizon", "8 days", false, false)

	if deleted := retirePublished(t, dbURL, 7*24*time.Hour, 1000); deleted != 2500 {
		t.Errorf("deleted %d rows, want the 2500 published ones older than 7 days", deleted)
	}
	for kind, want := range map[string]int{"old.published": 0, "new.published": 2500, "old.retrying": 2500, "old.dead": 2500,
		"old.after.horizon": 2500} {
		if got := count(t, conn, "SELECT count(*) FROM outbox_events WHERE event_type = $1", kind); got != want {
			t.Errorf("%s rows: %d left, want %d", kind, got, want)
		}
	}
	if got := count(t, conn, "SELECT count(*) FROM outbox_events_pending"); got != 2500*3 {
		t.Errorf("%d rows pending, want the %d retrying, dead-lettered and committed after the horizon", got, 2500*3)
	}
}

// --on-publish progress with --mode poll is a configuration error that says what to
// do; unset, poll mode marks.
func TestProgressNeedsStreamMode(t *testing.T) {
	cfg := relay.DefaultConfig()
	cfg.DatabaseURL, cfg.Mode = "postgres://x@localhost/db", relay.ModePoll
	if got := cfg.OnPublishMode(); got != poller.Mark {
		t.Errorf("poll mode's default on-publish is %s, want mark", got)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("poll mode with the default on-publish: %v", err)
	}
	cfg.OnPublish = poller.Progress
	if err := cfg.Validate(); err == nil {
		t.Error("progress with poll mode validated")
	}
	cfg.Mode = relay.ModeStream
	cfg.OnPublish = ""
	if got := cfg.OnPublishMode(); got != poller.Progress {
		t.Errorf("stream mode's default on-publish is %s, want progress", got)
	}
}
