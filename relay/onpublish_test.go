package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/poller"
)

// Each --on-publish mode leaves the table in the state it promises once the
// events are settled.
func TestOnPublishModes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode  poller.OnPublish
		query string // must return 0 once the mode did its work
	}{
		{poller.Mark, "SELECT count(*) FROM outbox_events WHERE processed_at IS NULL"},
		{poller.Delete, "SELECT count(*) FROM outbox_events"},
		// none: rows untouched (the application deletes them itself).
		{poller.None, "SELECT count(*) FROM outbox_events WHERE processed_at IS NOT NULL OR attempts > 0 OR retry_after IS NOT NULL"},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			t.Parallel()
			dbURL := testenv.MigratedDatabase(t)
			broker := testenv.Kafka(t)
			conn := testenv.Connect(t, dbURL)
			rn := start(t, dbURL, broker, "onpub_"+string(tc.mode), func(c *config) { c.OnPublish = tc.mode })
			consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
			var n int
			for i := 0; i < 4; i++ {
				n += len(testenv.WriteTx(t, conn, aggregates("op", 10), "e", 50, false))
			}
			if !consumer.WaitDistinct(time.Minute, n) {
				t.Fatalf("delivered %d of %d", consumer.Distinct(), n)
			}
			// A graceful stop settles everything, bookkeeping included.
			rn.stop()
			var left int
			if err := conn.QueryRow(context.Background(), tc.query).Scan(&left); err != nil {
				t.Fatal(err)
			}
			if left != 0 {
				t.Fatalf("%s: %d rows not in the promised state (%s)", tc.mode, left, tc.query)
			}
			var total int
			if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM outbox_events").Scan(&total); err != nil {
				t.Fatal(err)
			}
			if want := map[poller.OnPublish]int{poller.Mark: n, poller.Delete: 0, poller.None: n}[tc.mode]; total != want {
				t.Fatalf("%s: %d rows in the table, want %d", tc.mode, total, want)
			}
		})
	}
}

// Cleanup deletes processed rows past the retention and nothing else: pending,
// handed-over and dead-letter rows stay.
func TestCleanupKeepsUnprocessedRows(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, processed_at, retry_after, attempts, dead_lettered_at)
		SELECT 'order', 'a' || i, kind, '{}', processed, retry, attempts, dead
		FROM generate_series(1, 2500) AS i,
		LATERAL (VALUES
			('old.processed', now() - interval '8 days', NULL::timestamptz, 0, NULL::timestamptz),
			('new.processed', now() - interval '1 day', NULL, 0, NULL),
			('pending', NULL, NULL, 0, NULL),
			('retrying', NULL, now() - interval '30 days', 2, NULL),
			('dead', NULL, now() - interval '30 days', 10, now() - interval '20 days')
		) AS v(kind, processed, retry, attempts, dead)`); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	deleted, err := poller.NewStore(pool, catalog.DefaultShape("outbox_events"), poller.DefaultPolicy()).DeleteProcessed(ctx, 7*24*time.Hour, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if deleted != 2500 {
		t.Errorf("deleted %d rows, want the 2500 processed more than 7 days ago", deleted)
	}
	rows, err := conn.Query(ctx, "SELECT event_type, count(*) FROM outbox_events GROUP BY event_type")
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]int{}
	for rows.Next() {
		var kind string
		var n int
		if err := rows.Scan(&kind, &n); err != nil {
			t.Fatal(err)
		}
		left[kind] = n
	}
	for _, kind := range []string{"new.processed", "pending", "retrying", "dead"} {
		if left[kind] != 2500 {
			t.Errorf("%s rows: %d left, want 2500", kind, left[kind])
		}
	}
	if left["old.processed"] != 0 {
		t.Errorf("%d rows processed 8 days ago survived", left["old.processed"])
	}
}
