package poller_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/sink"
)

// settled records what the bookkeeper told each outcome.
type settled struct {
	mu  sync.Mutex
	err map[string]error
}

func (s *settled) settler(id string) sink.Done {
	return sink.DoneFunc(func(err error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.err[id] = err
	})
}

func (s *settled) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.err[id]
	return ok
}

// The bookkeeper settles an outcome only once its row's change committed: an acked
// row is marked, a failed one gets its attempt and retry_after, an unmappable one
// becomes a dead letter, and an event covered by an earlier exactly-once session is
// marked unless the poller has its row.
func TestBookkeeperSettlesAfterCommit(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	evs := testenv.WriteTx(t, conn, []string{"a"}, "e", 5, false)
	acked, failed, bad, covered, handedOver := evs[0], evs[1], evs[2], evs[3], evs[4]
	if _, err := conn.Exec(ctx, "UPDATE outbox_events SET attempts = 1, retry_after = now() + interval '1 hour' WHERE id = $1",
		handedOver.ID); err != nil {
		t.Fatal(err)
	}

	bk := runBookkeeper(t, dbURL)

	got := &settled{err: map[string]error{}}
	record := func(o poller.Outcome) { o.Bookkept = got.settler(o.Event.ID); bk.Record(o) }
	record(poller.Outcome{Event: &acked})
	record(poller.Outcome{Event: &failed, Err: &sink.EventError{Err: errors.New("too large")}})
	record(poller.Outcome{Event: &outbox.Event{ID: bad.ID}, Err: errors.New("created_at is infinity"), Unpublishable: true})
	record(poller.Outcome{Event: &covered, Covered: true})
	record(poller.Outcome{Event: &handedOver, Covered: true})
	if err := bk.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if !got.has(ev.ID) {
			t.Fatalf("event %s not settled after Wait", ev.ID)
		}
		if err := got.err[ev.ID]; err != nil {
			t.Fatalf("event %s settled with %v", ev.ID, err)
		}
	}

	state := func(id string) (processed, retry, dead bool, attempts int) {
		t.Helper()
		if err := conn.QueryRow(ctx, `SELECT processed_at IS NOT NULL, retry_after IS NOT NULL, dead_lettered_at IS NOT NULL, attempts
			FROM outbox_events WHERE id = $1`, id).Scan(&processed, &retry, &dead, &attempts); err != nil {
			t.Fatal(err)
		}
		return
	}
	if p, _, _, _ := state(acked.ID); !p {
		t.Error("the acked row is not marked processed")
	}
	if p, r, _, a := state(failed.ID); p || !r || a != 1 {
		t.Errorf("the failed row: processed %v, retry_after set %v, attempts %d; want false, true, 1", p, r, a)
	}
	if p, _, d, _ := state(bad.ID); p || !d {
		t.Errorf("the unmappable row: processed %v, dead letter %v; want false, true", p, d)
	}
	if p, _, _, _ := state(covered.ID); !p {
		t.Error("the covered row is not marked processed")
	}
	if p, r, _, a := state(handedOver.ID); p || !r || a != 1 {
		t.Errorf("the covered row the poller has: processed %v, retry_after set %v, attempts %d; want it left alone", p, r, a)
	}
}

// A row not yet visible (its commit is in the WAL, not yet visible to other
// sessions) is not settled unwritten, whatever its outcome writes: the mark of an
// acked row, the mark of a row an earlier exactly-once session covered, the dead
// letter of an unmappable row. Each waits in the queue while its transaction is
// invisible and settles once written. A row whose transaction is visible and that is
// gone (deleted by the application) settles at once.
func TestBookkeeperWaitsForInvisibleRows(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	bk := runBookkeeper(t, dbURL)

	gone := testenv.WriteTx(t, conn, []string{"gone"}, "e", 1, false)[0]
	var goneXid uint32
	if err := conn.QueryRow(ctx, "DELETE FROM outbox_events WHERE id = $1 RETURNING xmin::text::bigint", gone.ID).Scan(&goneXid); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var evs [3]outbox.Event
	for i := range evs {
		evs[i] = outbox.Event{AggregateType: "order", AggregateID: "late", EventType: "e", Payload: []byte(`{}`)}
		if err := outbox.Write(ctx, tx, &evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	var xid uint32
	if err := tx.QueryRow(ctx, "SELECT (pg_current_xact_id()::text::bigint % 4294967296)::bigint").Scan(&xid); err != nil {
		t.Fatal(err)
	}
	acked, covered, bad := evs[0], evs[1], evs[2]
	got := &settled{err: map[string]error{}}
	record := func(o poller.Outcome) { o.Bookkept = got.settler(o.Event.ID); bk.Record(o) }
	record(poller.Outcome{Event: &acked, Xid: xid})
	record(poller.Outcome{Event: &covered, Covered: true, Xid: xid})
	record(poller.Outcome{Event: &outbox.Event{ID: bad.ID}, Err: errors.New("created_at is infinity"), Unpublishable: true, Xid: xid})
	record(poller.Outcome{Event: &gone, Xid: goneXid})
	testenv.WaitFor(t, 30*time.Second, "the outcome of the deleted row to settle", func() bool { return got.has(gone.ID) })
	// Several batches pass while the rows are invisible; none may settle.
	waitCtx, cancelWait := context.WithTimeout(ctx, 300*time.Millisecond)
	err = bk.Wait(waitCtx)
	cancelWait()
	for _, ev := range evs {
		if got.has(ev.ID) {
			t.Errorf("the outcome of row %s, which no other session can see, was settled (Wait: %v)", ev.ID, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := bk.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var marked, dead int
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE processed_at IS NOT NULL AND id = ANY($1::uuid[])),
			count(*) FILTER (WHERE dead_lettered_at IS NOT NULL AND id = $2) FROM outbox_events`,
		[]string{acked.ID, covered.ID}, bad.ID).Scan(&marked, &dead); err != nil {
		t.Fatal(err)
	}
	if marked != 2 || dead != 1 {
		t.Fatalf("after the commit: %d of 2 rows marked, %d of 1 dead-lettered", marked, dead)
	}
	for _, ev := range evs {
		if !got.has(ev.ID) {
			t.Errorf("the outcome of row %s was not settled after its row was written", ev.ID)
		}
	}
}

// runBookkeeper runs a marking bookkeeper on dbURL's outbox until the test ends.
func runBookkeeper(t *testing.T, dbURL string) *poller.Bookkeeper {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	store := poller.NewStore(pool, catalog.DefaultShape("outbox_events"), poller.DefaultPolicy())
	bk := poller.NewBookkeeper(store, poller.Mark, 10*time.Millisecond, slog.New(slog.DiscardHandler))
	done := make(chan struct{})
	go func() { _ = bk.Run(ctx); close(done) }()
	t.Cleanup(func() { stop(); <-done; pool.Close() })
	return bk
}

// TestOutcomeSize keeps an outcome free of padding: a catch-up pass, or a stream in
// mark or delete mode, queues a full window of them while a backlog drains.
func TestOutcomeSize(t *testing.T) {
	if n := unsafe.Sizeof(poller.Outcome{}); n > 96 {
		t.Errorf("an outcome is %d bytes, want at most 96", n)
	}
}
