package poller_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

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

// An acked row not yet visible (its commit is in the WAL, not yet visible to other
// sessions) is not settled unmarked: it waits in the queue, and settles once marked.
func TestBookkeeperWaitsForInvisibleRow(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	bk := runBookkeeper(t, dbURL)

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ev := outbox.Event{AggregateType: "order", AggregateID: "late", EventType: "e", Payload: []byte(`{}`)}
	if err := outbox.Write(ctx, tx, &ev); err != nil {
		t.Fatal(err)
	}
	got := &settled{err: map[string]error{}}
	bk.Record(poller.Outcome{Event: &ev, Bookkept: got.settler(ev.ID)})
	// Several batches pass while the row is invisible; it must not settle.
	waitCtx, cancelWait := context.WithTimeout(ctx, 300*time.Millisecond)
	err = bk.Wait(waitCtx)
	cancelWait()
	if err == nil || got.has(ev.ID) {
		t.Fatalf("an acked row no other session can see was settled (Wait: %v)", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := bk.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var processed bool
	if err := conn.QueryRow(ctx, "SELECT processed_at IS NOT NULL FROM outbox_events WHERE id = $1", ev.ID).Scan(&processed); err != nil {
		t.Fatal(err)
	}
	if !got.has(ev.ID) || !processed {
		t.Fatalf("after the commit: settled %v, marked %v; want both", got.has(ev.ID), processed)
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
	store := poller.NewStore(pool, outbox.DefaultShape("outbox_events"), poller.DefaultPolicy())
	bk := poller.NewBookkeeper(store, poller.Mark, 10*time.Millisecond, slog.New(slog.DiscardHandler))
	done := make(chan struct{})
	go func() { _ = bk.Run(ctx); close(done) }()
	t.Cleanup(func() { stop(); <-done; pool.Close() })
	return bk
}
