package poller_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
)

// A catch-up pass on a standby passes a row's xmin on (Outcome.RowXid), which may be
// a subtransaction's. Snapshots list top-level xids only, so a subtransaction of an
// open transaction looks finished to pg_visible_in_snapshot once a later transaction
// ended; the bookkeeper does not take it for finished, and does not settle the row's
// outcome unwritten while its transaction is open.
func TestBookkeeperWaitsForARowOfAnOpenSubtransaction(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	bk := runBookkeeper(t, dbURL)
	var flushes atomic.Int64
	bk.OnFlush = func(time.Duration) { flushes.Add(1) }

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT pg_current_xact_id()"); err != nil { // the top level's xid first
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SAVEPOINT s"); err != nil {
		t.Fatal(err)
	}
	ev := outbox.Event{AggregateType: "order", AggregateID: "sub", EventType: "e", Payload: []byte(`{}`)}
	if err := outbox.Write(ctx, tx, &ev); err != nil {
		t.Fatal(err)
	}
	var subxid uint32
	if err := tx.QueryRow(ctx, "SELECT xmin::text::bigint FROM outbox_events WHERE id = $1", ev.ID).Scan(&subxid); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "RELEASE SAVEPOINT s"); err != nil {
		t.Fatal(err)
	}
	// A later transaction ends, so the subtransaction's xid is below every new
	// snapshot's xmax, and listed in none.
	testenv.WriteTx(t, testenv.Connect(t, dbURL), []string{"later"}, "e", 1, false)

	got := &settled{err: map[string]error{}}
	o := poller.Outcome{Event: &outbox.Event{ID: ev.ID}, Err: errors.New("created_at is infinity"), Unpublishable: true,
		Xid: subxid, RowXid: true}
	o.Bookkept = got.settler(ev.ID)
	bk.Record(o)
	testenv.WaitFor(t, 30*time.Second, "three batches written while the row is invisible", func() bool {
		return flushes.Load() >= 3 || got.has(ev.ID)
	})
	if got.has(ev.ID) {
		t.Fatal("the outcome of a row of an open subtransaction was settled: its xid was taken for a finished one")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := bk.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var dead bool
	if err := conn.QueryRow(ctx, "SELECT dead_lettered_at IS NOT NULL FROM outbox_events WHERE id = $1", ev.ID).Scan(&dead); err != nil {
		t.Fatal(err)
	}
	if !got.has(ev.ID) || !dead {
		t.Errorf("after the commit: settled %v, dead letter %v; want both", got.has(ev.ID), dead)
	}
}
