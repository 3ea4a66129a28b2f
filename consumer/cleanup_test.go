package consumer_test

import (
	"context"
	"testing"
	"time"

	"github.com/walrelay/walrelay/consumer"
	"github.com/walrelay/walrelay/internal/testenv"
)

func TestCleanupProcessed(t *testing.T) {
	t.Parallel()
	pool := newPool(t, testenv.MigratedDatabase(t))
	ctx := context.Background()
	ages := map[string]time.Duration{} // event id -> age
	insert := func(n int, age time.Duration) {
		for range n {
			id := newUUID()
			ages[id] = age
			if _, err := pool.Exec(ctx, "INSERT INTO processed_events (event_id, processed_at) VALUES ($1, now() - make_interval(secs => $2))",
				id, age.Seconds()); err != nil {
				t.Fatal(err)
			}
		}
	}
	insert(7, 48*time.Hour)
	insert(3, 25*time.Hour)
	insert(4, 23*time.Hour) // just inside the retention
	insert(5, 0)

	// 10 old rows in batches of 3: four statements, the last one short.
	deleted, err := consumer.CleanupProcessed(ctx, pool, 24*time.Hour, 3)
	if err != nil {
		t.Fatal(err)
	}
	if deleted != 10 {
		t.Errorf("deleted %d rows, want 10", deleted)
	}
	rows, err := pool.Query(ctx, "SELECT event_id::text FROM processed_events")
	if err != nil {
		t.Fatal(err)
	}
	left := 0
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		left++
		if ages[id] > 24*time.Hour {
			t.Errorf("row %s, %s old, survived a 24h cleanup", id, ages[id])
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if left != 9 {
		t.Errorf("%d rows left, want the 9 younger than 24h", left)
	}

	// Nothing more to do; bad arguments are refused.
	if n, err := consumer.CleanupProcessed(ctx, pool, 24*time.Hour, 3); n != 0 || err != nil {
		t.Errorf("second cleanup: (%d, %v), want (0, nil)", n, err)
	}
	if _, err := consumer.CleanupProcessed(ctx, pool, 0, 3); err == nil {
		t.Error("olderThan 0 was accepted")
	}
	if _, err := consumer.CleanupProcessed(ctx, pool, time.Hour, 0); err == nil {
		t.Error("batch 0 was accepted")
	}
	if _, err := (consumer.Dedup{Table: "app.missing"}).CleanupProcessed(ctx, pool, time.Hour, 10); err == nil {
		t.Error("cleanup of a missing table succeeded")
	}
}
