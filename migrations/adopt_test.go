package migrations_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/migrations"
)

func migrate(t *testing.T, o migrations.Options) (migrations.Report, string) {
	t.Helper()
	var out bytes.Buffer
	o.Out = &out
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := migrations.Migrate(ctx, o)
	if err != nil {
		t.Fatalf("migrate: %v\noutput:\n%s", err, out.String())
	}
	return rep, out.String()
}

func indexValid(t *testing.T, dbURL, name string) (exists, valid bool) {
	t.Helper()
	conn := testenv.Connect(t, dbURL)
	err := conn.QueryRow(context.Background(), `SELECT count(*) > 0, coalesce(bool_and(indisvalid), false) FROM pg_index
		WHERE indexrelid = to_regclass($1)`, name).Scan(&exists, &valid)
	if err != nil {
		t.Fatalf("read index %s: %v", name, err)
	}
	return exists, valid
}

// TestMigrateBuildsLargeTableIndexesConcurrently: over the row threshold the indexes
// are built with CREATE INDEX CONCURRENTLY, after the transaction committed.
func TestMigrateBuildsLargeTableIndexesConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := testenv.Database(t)
	conn := testenv.Connect(t, dbURL)
	if _, err := conn.Exec(ctx, `CREATE TABLE outbox_events (id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
		aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb NOT NULL,
		created_at timestamptz NOT NULL DEFAULT now());
		INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
			SELECT 'order', 'order-' || i, 'created', '{}' FROM generate_series(1, 50) i;
		ANALYZE outbox_events`); err != nil {
		t.Fatal(err)
	}
	rep, out := migrate(t, migrations.Options{DatabaseURL: dbURL, LargeTable: 10})
	concurrent := 0
	for _, s := range rep.Steps {
		if s.Concurrent {
			concurrent++
			if !strings.HasPrefix(s.SQL, "CREATE INDEX CONCURRENTLY IF NOT EXISTS") {
				t.Errorf("a step after the transaction is not a concurrent index build: %s", s.SQL)
			}
		} else if strings.Contains(s.SQL, "CREATE INDEX") {
			t.Errorf("an index of a large table is built inside the transaction: %s", s.SQL)
		}
	}
	if concurrent != 3 {
		t.Errorf("%d concurrent index builds, want 3\n%s", concurrent, out)
	}
	if !strings.Contains(out, "outside the transaction") {
		t.Errorf("migrate does not say the concurrent builds run outside the transaction:\n%s", out)
	}
	for _, idx := range []string{"idx_outbox_unprocessed", "idx_outbox_pending_aggregate", "idx_outbox_handed_over"} {
		if exists, valid := indexValid(t, dbURL, idx); !exists || !valid {
			t.Errorf("index %s: exists %t, valid %t", idx, exists, valid)
		}
	}
}

// TestMigrateRebuildsInvalidIndex: an INVALID index, which a failed CREATE INDEX
// CONCURRENTLY leaves behind and IF NOT EXISTS would keep, is dropped and built again.
func TestMigrateRebuildsInvalidIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	// What a cancelled concurrent build leaves (the test server's role is a superuser).
	if _, err := conn.Exec(ctx, "UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'idx_outbox_handed_over'::regclass"); err != nil {
		t.Fatal(err)
	}
	for _, large := range []float64{0, -1} {
		if large < 0 { // the concurrent path, too
			if _, err := conn.Exec(ctx, "UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'idx_outbox_handed_over'::regclass"); err != nil {
				t.Fatal(err)
			}
		}
		o := migrations.Options{DatabaseURL: dbURL}
		if large < 0 {
			o.LargeTable = 0.5
			if _, err := conn.Exec(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
				VALUES ('order', 'order-1', 'created', '{}'); ANALYZE outbox_events`); err != nil {
				t.Fatal(err)
			}
		}
		_, out := migrate(t, o)
		if !strings.Contains(out, `DROP INDEX`) || !strings.Contains(out, `"idx_outbox_handed_over"`) {
			t.Errorf("migrate (large %t) does not rebuild the invalid index:\n%s", large < 0, out)
		}
		if exists, valid := indexValid(t, dbURL, "idx_outbox_handed_over"); !exists || !valid {
			t.Errorf("idx_outbox_handed_over after migrate (large %t): exists %t, valid %t", large < 0, exists, valid)
		}
	}
}

// TestMigratePartitionedTable: a partitioned outbox gets its columns and indexes on
// the parent, and a publication that publishes through the partition root.
func TestMigratePartitionedTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := testenv.Database(t)
	conn := testenv.Connect(t, dbURL)
	if _, err := conn.Exec(ctx, `CREATE TABLE outbox_events (id uuid NOT NULL DEFAULT gen_random_uuid(),
		aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb NOT NULL,
		created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (id, created_at)) PARTITION BY RANGE (created_at);
		CREATE TABLE outbox_events_all PARTITION OF outbox_events DEFAULT`); err != nil {
		t.Fatal(err)
	}
	migrate(t, migrations.Options{DatabaseURL: dbURL})
	var viaRoot bool
	if err := conn.QueryRow(ctx, "SELECT pubviaroot FROM pg_publication WHERE pubname = 'walrelay'").Scan(&viaRoot); err != nil || !viaRoot {
		t.Errorf("publication walrelay: publish_via_partition_root %t (%v), want true", viaRoot, err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
		VALUES ('order', 'order-1', 'created', '{}')`); err != nil {
		t.Errorf("insert after migrate: %v", err)
	}
	if exists, _ := indexValid(t, dbURL, "idx_outbox_pending_aggregate"); !exists {
		t.Errorf("idx_outbox_pending_aggregate was not created on the partitioned table")
	}
}
