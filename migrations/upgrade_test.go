package migrations_test

import (
	"context"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/migrations"
)

// A database at version 7 with a relay's state in it migrates forward: each table
// of a slot that exists gets that slot as its one slot, covered since its catch-up
// pass (the older slot where two streamed one table), and the horizons recorded
// belong to this cluster and database, so the pending view reads them as before.
func TestMigrateFromVersion7(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbURL := testenv.MigratedDatabase(t)
	if err := migrations.DownTo(ctx, dbURL, 7); err != nil {
		t.Fatal(err)
	}
	conn := testenv.Connect(t, dbURL)
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
		SELECT 'order', 'a' || i, 'published', '{}' FROM generate_series(1, 5) i`)
	var system string
	if err := conn.QueryRow(ctx, "SELECT system_identifier::text FROM pg_control_system()").Scan(&system); err != nil {
		t.Fatal(err)
	}
	// Two slots of the table, as version 7 allowed, and one that is gone.
	for _, slot := range []string{"upgrade_older", "upgrade_newer"} {
		exec("SELECT pg_create_logical_replication_slot('" + slot + "', 'pgoutput')")
		exec(`INSERT INTO walrelay_slots (slot_name, created_at, catchup_done_at, table_oid, system_id, timeline)
			VALUES ('` + slot + `', clock_timestamp(), clock_timestamp(), 'outbox_events'::regclass, '` + system + `', 1)`)
		exec(`INSERT INTO walrelay_progress (slot_name, table_oid, slot_created_at, published_xid, confirmed_lsn)
			SELECT slot_name, table_oid, created_at, pg_snapshot_xmin(pg_current_snapshot()), pg_current_wal_insert_lsn()
			FROM walrelay_slots WHERE slot_name = '` + slot + `'`)
	}
	t.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE 'upgrade_%'")
	})
	exec(`INSERT INTO walrelay_slots (slot_name, catchup_done_at, table_oid) VALUES ('upgrade_gone', now(), 'outbox_events'::regclass)`)
	exec(`INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload) VALUES ('order', 'late', 'pending', '{}')`)

	rep, _ := migrate(t, migrations.Options{DatabaseURL: dbURL})
	if len(rep.Applied) == 0 || rep.Applied[0].Version != 8 {
		t.Fatalf("applied %v, want migration 8 first", rep.Applied)
	}
	var owner string
	var covered bool
	if err := conn.QueryRow(ctx, `SELECT slot_name, covered_at IS NOT NULL FROM walrelay_table_slots
		WHERE table_oid = 'outbox_events'::regclass`).Scan(&owner, &covered); err != nil {
		t.Fatal(err)
	}
	if owner != "upgrade_older" || !covered {
		t.Errorf("outbox_events belongs to %s (covered: %v), want the older slot upgrade_older, covered", owner, covered)
	}
	var here int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM walrelay_progress
		WHERE system_id = walrelay_system_id() AND database_oid = walrelay_database_oid()`).Scan(&here); err != nil {
		t.Fatal(err)
	}
	if here != 2 {
		t.Errorf("%d horizons belong to this cluster and database after the upgrade, want 2", here)
	}
	var pending int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox_events_pending").Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if pending != 1 {
		t.Errorf("%d rows pending after the upgrade, want the 1 written after the horizon", pending)
	}
	// Migrating again changes nothing.
	if rep, _ := migrate(t, migrations.Options{DatabaseURL: dbURL}); len(rep.Applied) != 0 || len(rep.Steps) != 0 {
		t.Errorf("a second migrate applied %v and planned %d steps", rep.Applied, len(rep.Steps))
	}
}

// A database at version 8, as a walrelay that trusted the slot alone left it, gets the
// record of the confirmed position (migration 9) and nothing else.
func TestMigrateFromVersion8(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbURL := testenv.MigratedDatabase(t)
	if err := migrations.DownTo(ctx, dbURL, 8); err != nil {
		t.Fatal(err)
	}
	conn := testenv.Connect(t, dbURL)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('walrelay_confirmed') IS NOT NULL").Scan(&exists); err != nil || exists {
		t.Fatalf("walrelay_confirmed exists at version 8 (%v, %v)", exists, err)
	}
	rep, _ := migrate(t, migrations.Options{DatabaseURL: dbURL})
	if len(rep.Applied) != 1 || rep.Applied[0].Version != 9 {
		t.Fatalf("applied %v, want migration 9 alone", rep.Applied)
	}
	if err := conn.QueryRow(ctx, "SELECT to_regclass('walrelay_confirmed') IS NOT NULL").Scan(&exists); err != nil || !exists {
		t.Fatalf("no walrelay_confirmed after migrating (%v, %v)", exists, err)
	}
	if rep, _ := migrate(t, migrations.Options{DatabaseURL: dbURL}); len(rep.Applied) != 0 || len(rep.Steps) != 0 {
		t.Errorf("a second migrate applied %v and planned %d steps", rep.Applied, len(rep.Steps))
	}
}
