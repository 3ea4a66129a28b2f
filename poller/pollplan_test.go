package poller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/testenv"
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
	query := poller.SelectQuery(catalog.DefaultShape("outbox_events"), true)
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
		!strings.Contains(plan, "idx_outbox_events_pending_aggregate") {
		t.Errorf("the poll reads more than the candidates and their aggregates' index entries:\n%s", plan)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The first 10,000 rows are of distinct aggregates: every candidate is due.
	n := selectedRows(ctx, t, conn, query, 1000)
	if n != 1000 {
		t.Errorf("the poll selected %d rows, want 1000", n)
	}
}

// A row is not due while a transaction older than its own is still running: that
// transaction may write an earlier event of the same aggregate, which commits later.
// Once it commits, its row comes first.
func TestPollOnlyWaitsForOlderTransactions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbURL := testenv.MigratedDatabase(t)
	long, writer, poll := testenv.Connect(t, dbURL), testenv.Connect(t, dbURL), testenv.Connect(t, dbURL)
	insert := `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
		VALUES ('order', $1, $2, '{}')`
	older, err := long.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer older.Rollback(ctx)
	if _, err := older.Exec(ctx, insert, "x", "first"); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]string{{"x", "second"}, {"y", "other"}} {
		if _, err := writer.Exec(ctx, insert, r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
	query := poller.SelectQuery(catalog.DefaultShape("outbox_events"), true)
	due := func() []string {
		tx, err := poll.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		rows, err := tx.Query(ctx, query, 100)
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for rows.Next() {
			v, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			types = append(types, v[3].(string))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return types
	}
	if got := due(); len(got) != 0 {
		t.Fatalf("while an older transaction runs, the poll selected %v; want nothing", got)
	}
	if err := older.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(due(), ","); got != "first,second,other" {
		t.Fatalf("after the older transaction committed, the poll selected %s; want first,second,other", got)
	}
}
