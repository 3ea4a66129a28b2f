package chaos_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testenv"
)

// TestBookkeepingAfterTinyTable guards against a performance bug the chaos suite
// found; the relay's pool now runs with plan_cache_mode = force_custom_plan.
//
// The bookkeeping marks rows with UPDATE ... WHERE id = ANY($1::uuid[]) through pgx's
// statement cache, i.e. a prepared statement. After five executions PostgreSQL may
// switch it to a generic plan, planned for the table as it is then. Planned while the
// outbox is small (a new deployment), that plan is a sequential scan filtering every
// row against the whole id array, one by one, and it stays cached while the table
// grows: each batch costs table rows × batch size. Batches then take longer than the
// 50ms tick, grow, take longer still, and the acked-but-unsettled events fill the
// in-flight window, which stops the stream until autovacuum's ANALYZE happens to
// invalidate the plan (autovacuum is off for the table here, to show it plainly).
func TestBookkeepingAfterTinyTable(t *testing.T) {
	ctx := context.Background()
	_, dbURL := startCluster(t, 10*time.Second)
	db := &admin{url: dbURL}
	t.Cleanup(db.close)
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "ALTER TABLE outbox_events SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	kafka := testenv.Kafka(t)
	relay := newRelayRuns(t, relayEnv(dbURL, strings.Join(kafka.ListenAddrs(), ","), "plan", "WALRELAY_ON_PUBLISH=mark")) // the marks are what this tests
	relay.start()
	waitStreaming(t, db, "plan", relay, time.Minute)
	consumer := testenv.NewConsumer(t, kafka.ListenAddrs(), `outbox\.event\..*`)

	// A small table first: one event at a time, each delivered and marked.
	for i := range 40 {
		if _, err := conn.Exec(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
			VALUES ('order', $1, 'order.created', '{}')`, fmt.Sprintf("o-%d", i)); err != nil {
			t.Fatal(err)
		}
		if !consumer.WaitDistinct(30*time.Second, i+1) {
			t.Fatalf("event %d not delivered", i)
		}
		if !poll(10*time.Second, func() bool {
			var pending int
			return db.queryRow(ctx, "SELECT count(*) FROM outbox_events WHERE processed_at IS NULL", nil, &pending) == nil && pending == 0
		}) {
			t.Fatalf("event %d not marked", i)
		}
	}
	// Then a burst: the relay streams and acks this at tens of thousands of events a
	// second (see TestHugeTransactions); with the cached plan it crawls.
	const n = 100_000
	if _, err := conn.Exec(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
		SELECT 'order', 'b-' || (i % 100), 'order.bulk', jsonb_build_object('i', i) FROM generate_series(1, $1) AS i`, n); err != nil {
		t.Fatal(err)
	}
	committed := time.Now()
	target, err := db.currentLSN(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 30 * time.Second
	var confirmed, delivered int
	if !poll(limit, func() bool {
		lsn, _, err := db.slotState(ctx, "plan")
		return err == nil && lsn >= target
	}) {
		consumer.WaitFor(time.Second, func() bool { return false })
		delivered = consumer.Distinct() - 40
		_ = db.queryRow(ctx, "SELECT count(*) FROM outbox_events WHERE processed_at IS NOT NULL", nil, &confirmed)
		var seqScans, seqRead, idxScans int64
		_ = db.queryRow(ctx, `SELECT seq_scan, seq_tup_read, coalesce(idx_scan, 0) FROM pg_stat_user_tables
			WHERE relname = 'outbox_events'`, nil, &seqScans, &seqRead, &idxScans)
		var running float64
		_ = db.queryRow(ctx, `SELECT coalesce(max(extract(epoch FROM now() - query_start)), 0) FROM pg_stat_activity
			WHERE state = 'active' AND query LIKE 'UPDATE %processed_at%'`, nil, &running)
		t.Errorf("%d events in one transaction not confirmed %s after the commit: %d delivered, %d rows marked, "+
			"the bookkeeping's UPDATE running for %.1fs; outbox_events: %d sequential scans reading %d rows, %d index scans "+
			"(counted when statements end)", n, limit, delivered, confirmed-40, running, seqScans, seqRead, idxScans)
		return
	}
	t.Logf("%d events confirmed %.1fs after the commit", n, time.Since(committed).Seconds())
	relay.stop(30 * time.Second)
}
