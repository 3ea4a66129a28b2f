package migrations_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/migrations"
	"github.com/walrelay/walrelay/outbox"
)

func migrate(t *testing.T, o migrations.Options) (migrations.Report, string) {
	t.Helper()
	rep, out, err := migrateReport(o)
	if err != nil {
		t.Fatalf("migrate: %v\noutput:\n%s", err, out)
	}
	return rep, out
}

// migrateErr runs Migrate and returns its output and error.
func migrateErr(o migrations.Options) (string, error) {
	_, out, err := migrateReport(o)
	return out, err
}

func migrateReport(o migrations.Options) (migrations.Report, string, error) {
	var out bytes.Buffer
	o.Out = &out
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := migrations.Migrate(ctx, o)
	return rep, out.String(), err
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
	if !strings.Contains(out, "after the commit") {
		t.Errorf("migrate does not say the concurrent builds run after the commit:\n%s", out)
	}
	for _, idx := range []string{"idx_outbox_events_unprocessed", "idx_outbox_events_pending_aggregate", "idx_outbox_events_handed_over"} {
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
	if _, err := conn.Exec(ctx, "UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'idx_outbox_events_handed_over'::regclass"); err != nil {
		t.Fatal(err)
	}
	for _, large := range []float64{0, -1} {
		if large < 0 { // the concurrent path, too
			if _, err := conn.Exec(ctx, "UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'idx_outbox_events_handed_over'::regclass"); err != nil {
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
		if !strings.Contains(out, `DROP INDEX`) || !strings.Contains(out, `"idx_outbox_events_handed_over"`) {
			t.Errorf("migrate (large %t) does not rebuild the invalid index:\n%s", large < 0, out)
		}
		if exists, valid := indexValid(t, dbURL, "idx_outbox_events_handed_over"); !exists || !valid {
			t.Errorf("idx_outbox_events_handed_over after migrate (large %t): exists %t, valid %t", large < 0, exists, valid)
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
	if exists, _ := indexValid(t, dbURL, "idx_outbox_events_pending_aggregate"); !exists {
		t.Errorf("idx_outbox_events_pending_aggregate was not created on the partitioned table")
	}
}

// A partitioned table of more rows than the threshold: its indexes are created ON ONLY
// the parent in the transaction, built CONCURRENTLY per partition after it and
// attached, so the application's writes go on during the builds. Here a build is held
// at its wait for older snapshots (an open transaction elsewhere) while the test
// inserts with a short lock timeout. The row estimate is the partitions'.
func TestMigratePartitionedTableWritesGoOn(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dbURL := testenv.Database(t)
	conn := testenv.Connect(t, dbURL)
	if _, err := conn.Exec(ctx, `CREATE TABLE outbox_events (id uuid NOT NULL DEFAULT gen_random_uuid(),
		aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb NOT NULL,
		created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (id, created_at)) PARTITION BY RANGE (created_at);
		CREATE TABLE outbox_events_old PARTITION OF outbox_events FOR VALUES FROM (MINVALUE) TO ('2026-01-01');
		CREATE TABLE outbox_events_new PARTITION OF outbox_events DEFAULT;
		INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at)
			SELECT 'order', 'order-' || i, 'created', '{}', CASE WHEN i % 2 = 0 THEN '2025-06-01'::timestamptz ELSE now() END
			FROM generate_series(1, 1000) i;
		ANALYZE outbox_events_old; ANALYZE outbox_events_new`); err != nil {
		t.Fatal(err)
	}
	// An open transaction with a snapshot: each concurrent build waits for it at its end.
	holder := testenv.Connect(t, dbURL)
	snapshot, err := holder.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Exec(ctx, "SELECT count(*) FROM pg_class"); err != nil {
		t.Fatal(err)
	}
	type result struct {
		err error
		out string
	}
	done := make(chan result, 1)
	go func() {
		out, err := migrateErr(migrations.Options{DatabaseURL: dbURL, LargeTable: 100})
		done <- result{err, out}
	}()
	var waiting bool
	if !testenv.Eventually(time.Minute, func() bool {
		select {
		case r := <-done:
			t.Fatalf("migrate finished (err %v) without building an index concurrently on a partition, "+
				"so it held its locks through the builds:\n%s", r.err, r.out)
		default:
		}
		err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_progress_create_index p
			JOIN pg_class c ON c.oid = p.relid WHERE p.command = 'CREATE INDEX CONCURRENTLY'
			AND c.relname IN ('outbox_events_old', 'outbox_events_new') AND p.phase = 'waiting for old snapshots')`).Scan(&waiting)
		return err == nil && waiting
	}) {
		t.Fatal("no concurrent build on a partition reached its wait for older snapshots")
	}
	writer := testenv.Connect(t, dbURL)
	if _, err := writer.Exec(ctx, "SET lock_timeout = '2s'"); err != nil {
		t.Fatal(err)
	}
	for _, at := range []string{"2025-07-01", "2026-07-01"} {
		if _, err := writer.Exec(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at)
			VALUES ('order', 'during', 'created', '{}', $1)`, at); err != nil {
			t.Fatalf("an insert while migrate builds the indexes (row of %s): %v", at, err)
		}
	}
	if err := snapshot.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("migrate: %v\n%s", r.err, r.out)
	}
	if !strings.Contains(r.out, "about 1000 rows") || !strings.Contains(r.out, "CONCURRENTLY per partition") {
		t.Errorf("migrate does not report the partitions' rows and the per-partition builds:\n%s", r.out)
	}
	var parents, partitions int
	if err := conn.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM pg_index WHERE indrelid = 'outbox_events'::regclass AND NOT indisunique AND indisvalid),
			(SELECT count(*) FROM pg_index i JOIN pg_inherits h ON h.inhrelid = i.indexrelid
				WHERE i.indrelid IN ('outbox_events_old'::regclass, 'outbox_events_new'::regclass) AND NOT i.indisunique AND i.indisvalid)`).
		Scan(&parents, &partitions); err != nil {
		t.Fatal(err)
	}
	if parents != 3 || partitions != 6 {
		t.Errorf("after migrate: %d valid indexes of walrelay's on the parent (want 3), %d attached on the partitions (want 6)\n%s",
			parents, partitions, r.out)
	}
	if _, out := migrate(t, migrations.Options{DatabaseURL: dbURL, LargeTable: 100}); strings.Contains(out, "CREATE INDEX") {
		t.Errorf("migrate again builds indexes again:\n%s", out)
	}
}

// What `walrelay run` refuses on an existing table, migrate refuses first, with run's
// advice, and changes nothing: no bookkeeping column, no publication, none of
// walrelay's tables.
func TestMigrateRefusesWhatRunRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, ddl, want string }{
		{"integer payload", `CREATE TABLE ev (id uuid PRIMARY KEY, aggregate_type text, aggregate_id text, event_type text,
			payload integer, created_at timestamptz)`, "column payload of table public.ev has type integer"},
		{"no unique index on id", `CREATE TABLE ev (id uuid, aggregate_type text, aggregate_id text, event_type text,
			payload jsonb, created_at timestamptz)`, `table public.ev has no unique index on its id column "id"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dbURL := testenv.Database(t)
			conn := testenv.Connect(t, dbURL)
			if _, err := conn.Exec(ctx, tc.ddl); err != nil {
				t.Fatal(err)
			}
			out, err := migrateErr(migrations.Options{DatabaseURL: dbURL, Table: "public.ev"})
			var conflict *migrations.ConflictError
			if !errors.As(err, &conflict) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "nothing was changed") {
				t.Fatalf("migrate: %v, want a conflict saying %q\n%s", err, tc.want, out)
			}
			var changed bool
			if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'ev'::regclass AND attname = 'attempts')
				OR EXISTS (SELECT 1 FROM pg_publication) OR to_regclass('walrelay_slots') IS NOT NULL`).Scan(&changed); err != nil || changed {
				t.Errorf("a refused migrate changed the database (%v)", err)
			}
		})
	}
}

// walrelay's own outbox_events and Debezium's outbox in one schema: each gets indexes
// and a dead-letter view named after it. In a database whose outbox_events has them
// under the older names (idx_outbox_*, outbox_dead_letters), those count as
// walrelay's, and adopting outbox names the renames it needs and changes nothing.
func TestMigrateTwoTablesInOneSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	debezium := migrations.Options{Table: "outbox", Publication: "debezium", Columns: outbox.Columns{ID: "id",
		AggregateType: "aggregatetype", AggregateID: "aggregateid", EventType: "type", Payload: "payload"}}
	createDebezium := func(t *testing.T, conn *pgx.Conn) {
		t.Helper()
		if _, err := conn.Exec(ctx, `CREATE TABLE outbox (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
			aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)`); err != nil {
			t.Fatal(err)
		}
	}
	objects := func(t *testing.T, conn *pgx.Conn, table string) []string {
		t.Helper()
		rows, err := conn.Query(ctx, `SELECT c.relname FROM pg_class c WHERE c.oid IN (
				SELECT indexrelid FROM pg_index WHERE indrelid = $1::regclass AND NOT indisunique
				UNION SELECT r.ev_class FROM pg_rewrite r JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
					WHERE d.refobjid = $1::regclass AND r.ev_class <> $1::regclass)
			ORDER BY 1`, table)
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return names
	}

	t.Run("fresh", func(t *testing.T) {
		t.Parallel()
		dbURL := testenv.MigratedDatabase(t)
		conn := testenv.Connect(t, dbURL)
		createDebezium(t, conn)
		o := debezium
		o.DatabaseURL = dbURL
		migrate(t, o)
		want := map[string]string{
			"outbox_events": "idx_outbox_events_handed_over idx_outbox_events_pending_aggregate idx_outbox_events_unprocessed " +
				"outbox_events_dead_letters outbox_events_pending",
			"outbox": "idx_outbox_handed_over idx_outbox_pending_aggregate idx_outbox_unprocessed outbox_dead_letters outbox_pending",
		}
		for table, names := range want {
			if got := strings.Join(objects(t, conn, table), " "); got != names {
				t.Errorf("%s has %s, want %s", table, got, names)
			}
		}
	})

	t.Run("older names", func(t *testing.T) {
		t.Parallel()
		dbURL := testenv.MigratedDatabase(t)
		conn := testenv.Connect(t, dbURL)
		for _, suffix := range []string{"unprocessed", "pending_aggregate", "handed_over"} {
			if _, err := conn.Exec(ctx, "ALTER INDEX idx_outbox_events_"+suffix+" RENAME TO idx_outbox_"+suffix); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := conn.Exec(ctx, "ALTER VIEW outbox_events_dead_letters RENAME TO outbox_dead_letters"); err != nil {
			t.Fatal(err)
		}
		if _, out := migrate(t, migrations.Options{DatabaseURL: dbURL}); !strings.Contains(out, "nothing to apply") &&
			strings.Contains(out, "CREATE") {
			t.Errorf("migrate creates objects outbox_events has under the older names:\n%s", out)
		}
		createDebezium(t, conn)
		o := debezium
		o.DatabaseURL = dbURL
		out, err := migrateErr(o)
		if err == nil || !strings.Contains(err.Error(), `RENAME TO "idx_outbox_events_unprocessed"`) {
			t.Fatalf("adopting outbox beside the older names: %v, want the renames named\n%s", err, out)
		}
		if names := objects(t, conn, "outbox"); len(names) != 0 {
			t.Errorf("a refused migrate created %v", names)
		}
	})
}
