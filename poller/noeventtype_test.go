package poller_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
)

// A table without an event type column (Debezium's router reads none): the rows the
// poller writes itself, a failed event whose row is gone and a dead letter, go in
// without one, and the dead letters read back with an empty type.
func TestTableWithoutEventType(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbURL := testenv.Database(t)
	conn := testenv.Connect(t, dbURL)
	if _, err := conn.Exec(ctx, `CREATE TABLE outbox (id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL,
		payload jsonb, attempts int NOT NULL DEFAULT 0, processed_at timestamptz, retry_after timestamptz, last_error text,
		dead_lettered_at timestamptz)`); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	shape := catalog.Shape{Schema: "public", Name: "outbox", IDType: "uuid", PayloadType: "jsonb", Key: []string{"id"},
		Columns: outbox.Columns{ID: "id", AggregateType: "aggregatetype", AggregateID: "aggregateid", Payload: "payload"}}
	store := poller.NewStore(pool, shape, poller.Policy{MaxAttempts: 3, BackoffMin: time.Second, BackoffMax: time.Minute})
	failed := &outbox.Event{ID: "6f1c6a2e-3c6b-4f0e-9a53-0c4b1b7e2a10", AggregateType: "order", AggregateID: "1", Payload: []byte(`{"n": 1}`)}
	dead := &outbox.Event{ID: "9b2e4c1d-8a7f-4e3b-b6d5-2f1a0c9e8d70", AggregateType: "order", AggregateID: "2", Payload: []byte(`{"n": 2}`)}
	if _, _, err := store.RecordFailures(ctx, pool, []poller.Failure{{Event: failed, Err: errors.New("refused")}}); err != nil {
		t.Fatal(err)
	}
	if err := store.InsertDeadLetter(ctx, dead, errors.New("malformed")); err != nil {
		t.Fatal(err)
	}
	var attempts int
	if err := conn.QueryRow(ctx, "SELECT attempts FROM outbox WHERE id = $1", failed.ID).Scan(&attempts); err != nil || attempts != 1 {
		t.Fatalf("failed event's row: attempts %d, %v; want 1", attempts, err)
	}
	dls, err := store.DeadLetters(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 1 || dls[0].ID != dead.ID || dls[0].EventType != "" {
		t.Fatalf("dead letters %+v, want %s with no event type", dls, dead.ID)
	}
}
