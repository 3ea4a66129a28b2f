package poller_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/poller"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// In stream mode a large backlog of unprocessed rows is the stream's business; the
// poller must reach the few handed-over rows through their own index instead of
// walking every pending row on each poll.
func TestStreamModePollReadsOnlyHandedOverRows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := testenv.Connect(t, testenv.MigratedDatabase(t))
	if _, err := conn.Exec(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
		SELECT 'order', 'agg-' || (g % 100), 'order.created', '{}' FROM generate_series(1, 50000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE outbox_events SET attempts = 1, retry_after = now() - interval '1 second'
		WHERE id IN (SELECT id FROM outbox_events ORDER BY random() LIMIT 3)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "ANALYZE outbox_events"); err != nil {
		t.Fatal(err)
	}
	query := poller.SelectQuery(catalog.DefaultShape("outbox_events"), false)

	rows, err := conn.Query(ctx, "EXPLAIN "+query, 100)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if !strings.Contains(plan, "idx_outbox_events_handed_over") || strings.Contains(plan, "Seq Scan") ||
		strings.Contains(plan, "idx_outbox_events_unprocessed") {
		t.Errorf("the stream-mode poll does not read through idx_outbox_events_handed_over alone:\n%s", plan)
	}

	n := selectedRows(ctx, t, conn, query, 100)
	if n != 3 {
		t.Errorf("the poll selected %d rows, want the 3 handed-over ones", n)
	}
}

// Published marks the rows it finds and tells which those are, whether all were
// there (the usual case, answered by the row count) or some were not.
func TestPublishedReportsFoundRows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	rows, err := conn.Query(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
		SELECT 'order', 'a', 'order.created', '{}' FROM generate_series(1, 4) RETURNING id::text`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store := poller.NewStore(pool, catalog.DefaultShape("outbox_events"), poller.DefaultPolicy())
	missing := "00000000-0000-4000-8000-000000000000"

	all, err := store.Published(ctx, pool, poller.Mark, ids[:2])
	if err != nil {
		t.Fatal(err)
	}
	some, err := store.Published(ctx, pool, poller.Mark, []string{ids[2], missing, ids[2]})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		found poller.Found
		id    string
		want  bool
	}{{all, ids[0], true}, {all, ids[1], true}, {some, ids[2], true}, {some, missing, false}, {some, ids[3], false}} {
		if got := c.found.Has(c.id); got != c.want {
			t.Errorf("Has(%s) = %v, want %v", c.id, got, c.want)
		}
	}
	var marked int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox_events WHERE processed_at IS NOT NULL").Scan(&marked); err != nil {
		t.Fatal(err)
	}
	if marked != 3 {
		t.Errorf("%d rows marked, want 3", marked)
	}
}

// selectedRows runs the poll query in a transaction it rolls back and counts the rows
// it selected.
func selectedRows(ctx context.Context, t *testing.T, conn *pgx.Conn, query string, limit int) int {
	t.Helper()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	got, err := tx.Query(ctx, query, limit)
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
	return n
}
