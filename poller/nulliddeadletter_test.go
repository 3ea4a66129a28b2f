package poller_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
)

// An adopted table may allow a NULL id, and such a row is a dead letter. Its dead
// letter is found through the row itself, never through another row with a NULL id
// that is no dead letter: while the streamed row's transaction is not visible yet
// its outcome stays unsettled, the other row is left alone, and once the transaction
// commits the row's own dead letter is written.
func TestNullIDDeadLetterNotFoundThroughAnotherRow(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	if _, err := conn.Exec(ctx, `CREATE TABLE nid (id uuid UNIQUE, aggregate_type text NOT NULL, aggregate_id text NOT NULL,
		event_type text NOT NULL, payload jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now(),
		attempts int NOT NULL DEFAULT 0, processed_at timestamptz, retry_after timestamptz, last_error text,
		dead_lettered_at timestamptz)`); err != nil {
		t.Fatal(err)
	}
	const row = `INSERT INTO nid (aggregate_type, aggregate_id, event_type, payload) VALUES ('order', $1, 'e', '{}')`
	// The other row: committed, with a NULL id, and no outcome of it is recorded here
	// (its own is elsewhere: the poller's, or a later batch's).
	if _, err := conn.Exec(ctx, row, "other"); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, row, "streamed"); err != nil {
		t.Fatal(err)
	}
	var xid uint32
	if err := tx.QueryRow(ctx, "SELECT (pg_current_xact_id()::text::bigint % 4294967296)::bigint").Scan(&xid); err != nil {
		t.Fatal(err)
	}

	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store := poller.NewStore(pool, catalog.DefaultShape("nid"), poller.DefaultPolicy())
	bk := poller.NewBookkeeper(store, poller.Mark, 10*time.Millisecond, slog.New(slog.DiscardHandler))
	var flushes atomic.Int64
	bk.OnFlush = func(time.Duration) { flushes.Add(1) }
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = bk.Run(runCtx); close(done) }()
	defer func() { stop(); <-done }()

	got := &settled{err: map[string]error{}}
	// The stream's outcome of the row: no id, its transaction's xid.
	o := poller.Outcome{Event: &outbox.Event{Table: "public.nid"}, Err: fmt.Errorf("outbox row: column id %w", poller.ErrNullID),
		Unpublishable: true, NullID: true, Xid: xid}
	o.Bookkept = got.settler("")
	bk.Record(o)

	state := func(aggregate string) (dead bool, attempts int) {
		t.Helper()
		if err := conn.QueryRow(ctx, "SELECT dead_lettered_at IS NOT NULL, attempts FROM nid WHERE aggregate_id = $1",
			aggregate).Scan(&dead, &attempts); err != nil {
			t.Fatal(err)
		}
		return dead, attempts
	}
	testenv.WaitFor(t, 30*time.Second, "three batches written while the row is invisible", func() bool {
		return flushes.Load() >= 3 || got.has("")
	})
	if got.has("") {
		t.Error("the outcome of the invisible row with a NULL id was settled, found through the other row")
	}
	if dead, attempts := state("other"); dead || attempts != 0 {
		t.Errorf("the other row with a NULL id was taken for the streamed one: dead letter %v, attempts %d", dead, attempts)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := bk.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if !got.has("") || got.err[""] != nil {
		t.Fatalf("the outcome was not settled after its row was written (settled %v, %v)", got.has(""), got.err[""])
	}
	if dead, attempts := state("streamed"); !dead || attempts != 1 {
		t.Errorf("the streamed row with a NULL id: dead letter %v, attempts %d; want true, 1", dead, attempts)
	}
	if dead, attempts := state("other"); dead || attempts != 0 {
		t.Errorf("the other row with a NULL id was dead-lettered by the streamed row's outcome: dead letter %v, attempts %d",
			dead, attempts)
	}
}

// A row with a NULL id that a subtransaction inserted has the subtransaction's xid,
// not the one the stream names: once its transaction is seen finished and no row
// has that xid, the row is still found, among the rows with a NULL id inserted by
// that transaction or a newer one, and an older such row is left alone.
func TestNullIDDeadLetterOfASubtransaction(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	if _, err := conn.Exec(ctx, `CREATE TABLE nid (id uuid UNIQUE, aggregate_type text NOT NULL, aggregate_id text NOT NULL,
		event_type text NOT NULL, payload jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now(),
		attempts int NOT NULL DEFAULT 0, processed_at timestamptz, retry_after timestamptz, last_error text,
		dead_lettered_at timestamptz)`); err != nil {
		t.Fatal(err)
	}
	const row = `INSERT INTO nid (aggregate_type, aggregate_id, event_type, payload) VALUES ('order', $1, 'e', '{}')`
	if _, err := conn.Exec(ctx, row, "older"); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	var xid uint32
	if err := tx.QueryRow(ctx, "SELECT (pg_current_xact_id()::text::bigint % 4294967296)::bigint").Scan(&xid); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SAVEPOINT s"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, row, "in-savepoint"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "RELEASE SAVEPOINT s"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var rowXmin uint32
	if err := conn.QueryRow(ctx, "SELECT xmin::text::bigint FROM nid WHERE aggregate_id = 'in-savepoint'").Scan(&rowXmin); err != nil {
		t.Fatal(err)
	}
	if rowXmin == xid {
		t.Fatalf("the row's xmin is its top-level xid %d: the savepoint made no subtransaction", xid)
	}

	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store := poller.NewStore(pool, catalog.DefaultShape("nid"), poller.DefaultPolicy())
	bk := poller.NewBookkeeper(store, poller.Mark, 10*time.Millisecond, slog.New(slog.DiscardHandler))
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = bk.Run(runCtx); close(done) }()
	defer func() { stop(); <-done }()

	got := &settled{err: map[string]error{}}
	o := poller.Outcome{Event: &outbox.Event{Table: "public.nid"}, Err: fmt.Errorf("outbox row: column id %w", poller.ErrNullID),
		Unpublishable: true, NullID: true, Xid: xid}
	o.Bookkept = got.settler("")
	bk.Record(o)
	if err := bk.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if !got.has("") || got.err[""] != nil {
		t.Fatalf("the outcome was not settled (settled %v, %v)", got.has(""), got.err[""])
	}
	var inSavepoint, older bool
	if err := conn.QueryRow(ctx, `SELECT bool_or(dead_lettered_at IS NOT NULL) FILTER (WHERE aggregate_id = 'in-savepoint'),
			bool_or(dead_lettered_at IS NOT NULL) FILTER (WHERE aggregate_id = 'older') FROM nid`).Scan(&inSavepoint, &older); err != nil {
		t.Fatal(err)
	}
	if !inSavepoint {
		t.Error("the row a subtransaction inserted is no dead letter")
	}
	if older {
		t.Error("the older row with a NULL id was dead-lettered by a newer transaction's outcome")
	}
}
