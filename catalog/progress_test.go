package catalog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/testenv"
)

// The published horizon is written only by the owner of the slot's current
// incarnation, once its catch-up pass is done, and never moves back: a deposed
// leader, or a relay killed and started again with an older candidate, cannot lower
// it (docs/design.md invariant 10).
func TestPublishedHorizonOwnerAndMonotonic(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := testenv.Connect(t, testenv.MigratedDatabase(t))
	tables := []string{"public.outbox_events"}
	read := func() uint64 {
		t.Helper()
		xid, err := catalog.ReadPublished(ctx, conn, "horizon", "public.outbox_events")
		if err != nil {
			t.Fatal(err)
		}
		return xid
	}

	if _, err := catalog.ClaimTables(ctx, conn, "horizon", tables); err != nil {
		t.Fatal(err)
	}
	deposed, err := catalog.RecordSlot(ctx, conn, "horizon")
	if err != nil {
		t.Fatal(err)
	}
	if err := catalog.RecordPublished(ctx, conn, "horizon", deposed, catalog.Published{XID: 100, LSN: 1}, tables); !errors.Is(err, catalog.ErrNotSlotOwner) {
		t.Fatalf("recording before the catch-up pass is done: err = %v, want ErrNotSlotOwner", err)
	}
	if err := catalog.MarkCatchupDone(ctx, conn, "horizon", deposed, tables); err != nil {
		t.Fatal(err)
	}
	if err := catalog.RecordPublished(ctx, conn, "horizon", deposed, catalog.Published{XID: 100, LSN: 1}, tables); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != 100 {
		t.Fatalf("horizon %d, want 100", got)
	}
	if err := catalog.RecordPublished(ctx, conn, "horizon", deposed, catalog.Published{XID: 50, LSN: 2}, tables); err != nil {
		t.Fatalf("an older candidate is not an error: %v", err)
	}
	if got := read(); got != 100 {
		t.Fatalf("horizon moved back to %d, want 100", got)
	}

	// Another instance creates the slot again: the old horizon stays for its
	// catch-up pass, and the deposed leader can no longer write.
	current, err := catalog.RecordSlot(ctx, conn, "horizon")
	if err != nil {
		t.Fatal(err)
	}
	if err := catalog.RecordPublished(ctx, conn, "horizon", deposed, catalog.Published{XID: 200, LSN: 3}, tables); !errors.Is(err, catalog.ErrNotSlotOwner) {
		t.Fatalf("deposed leader recording: err = %v, want ErrNotSlotOwner", err)
	}
	if got := read(); got != 100 {
		t.Fatalf("horizon %d after the deposed leader tried, want 100 (the lost incarnation's)", got)
	}
	if err := catalog.MarkCatchupDone(ctx, conn, "horizon", current, tables); err != nil {
		t.Fatal(err)
	}
	if err := catalog.RecordPublished(ctx, conn, "horizon", current, catalog.Published{XID: 300, LSN: 4}, tables); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != 300 {
		t.Fatalf("horizon %d, want the new owner's 300", got)
	}
}

// A candidate horizon's xid is the snapshot's xmin: a transaction still open, with
// a row inserted in a subtransaction, is not below it, though pg_visible_in_snapshot
// would call that subtransaction's xid visible (PostgreSQL's snapshots list
// top-level xids only).
func TestHorizonExcludesOpenSubtransactions(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbURL := testenv.MigratedDatabase(t)
	conn, open := testenv.Connect(t, dbURL), testenv.Connect(t, dbURL)

	tx, err := open.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT pg_current_xact_id()"); err != nil { // the top-level xid first
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SAVEPOINT s"); err != nil {
		t.Fatal(err)
	}
	var sub uint64
	if err := tx.QueryRow(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
		VALUES ('order', 'sub', 'created', '{}') RETURNING xmin::text::bigint`).Scan(&sub); err != nil {
		t.Fatal(err)
	}
	// A later transaction commits, so the snapshot's xmax passes the subtransaction.
	if _, err := conn.Exec(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
		VALUES ('order', 'later', 'created', '{}')`); err != nil {
		t.Fatal(err)
	}
	c, err := catalog.TakeHorizon(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	var naive bool
	if err := conn.QueryRow(ctx, "SELECT pg_visible_in_snapshot($1::bigint::text::xid8, pg_current_snapshot())", int64(sub)).Scan(&naive); err != nil {
		t.Fatal(err)
	}
	if !naive {
		t.Error("pg_visible_in_snapshot judged the open subtransaction right; docs/design.md invariant 10 says it does not")
	}
	if sub < c.XID {
		t.Fatalf("row of an open subtransaction (xid %d) is below the horizon %d: it would count as published", sub, c.XID)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var published bool
	if err := conn.QueryRow(ctx, `SELECT walrelay_published(xmin, processed_at, retry_after, dead_lettered_at, $1, (SELECT walrelay_next_xid()))
		FROM outbox_events WHERE aggregate_id = 'sub'`, int64(c.XID)).Scan(&published); err != nil {
		t.Fatal(err)
	}
	if published {
		t.Fatal("a row committed after the horizon was taken counts as published")
	}
}
