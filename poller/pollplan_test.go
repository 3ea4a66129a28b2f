package poller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
)

// A poll-only batch of a thousand rows from a large backlog reads the rows it locks
// and one index probe per candidate for an earlier row of its aggregate: never the
// whole table, which a hash anti join over every pending row would.
func TestPollOnlyLargeBatchProbesEarlierRows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := testenv.Connect(t, testenv.MigratedDatabase(t))
	// 100,000 rows in transactions of 100, 10 per aggregate, as a backlog builds up.
	if _, err := conn.Exec(ctx, `DO $$ BEGIN FOR t IN 0..999 LOOP
		INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
		SELECT 'order', 'agg-' || (g % 10000), 'order.created', '{}' FROM generate_series(t*100, t*100 + 99) g;
		COMMIT; END LOOP; END $$`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE outbox_events"); err != nil {
		t.Fatal(err)
	}
	query := poller.SelectQuery(outbox.DefaultShape("outbox_events"), true)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, FORMAT TEXT) "+query, 1000)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Hash Anti Join") ||
		!strings.Contains(plan, "idx_outbox_pending_aggregate") {
		t.Errorf("the poll reads more than the candidates and their aggregates' index entries:\n%s", plan)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The first 10,000 rows are of distinct aggregates: every candidate is due.
	tx, err = conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	got, err := tx.Query(ctx, query, 1000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for got.Next() {
		n++
	}
	if err := got.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 1000 {
		t.Errorf("the poll selected %d rows, want 1000", n)
	}
}
