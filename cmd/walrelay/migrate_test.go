package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMigrateTwice(t *testing.T) {
	t.Parallel()
	dbURL := testenv.Database(t)

	first := run(t, time.Minute, baseEnv(), "migrate", "--database-url", dbURL)
	if first.code != 0 {
		t.Fatalf("first migrate: exit code %d\nstdout:\n%s\nstderr:\n%s", first.code, first.stdout, first.stderr)
	}
	applied := regexp.MustCompile(`(?m)^applied migration (\d+) \(\S+\.sql, ran \S+\)$`).FindAllStringSubmatch(first.stdout, -1)
	if len(applied) == 0 {
		t.Fatalf("first migrate lists no applied migration:\n%s", first.stdout)
	}

	// Again, configured through the environment this time: nothing left to do.
	second := run(t, time.Minute, baseEnv("WALRELAY_DATABASE_URL="+dbURL), "migrate")
	if second.code != 0 {
		t.Fatalf("second migrate: exit code %d\nstdout:\n%s\nstderr:\n%s", second.code, second.stdout, second.stderr)
	}
	if !strings.Contains(second.stdout, "nothing to apply") || strings.Contains(second.stdout, "applied migration") {
		t.Errorf("second migrate should apply nothing, said:\n%s", second.stdout)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := testenv.Connect(t, dbURL)

	// Every applied migration is recorded once, and only those.
	var recorded int
	if err := conn.QueryRow(ctx,
		"SELECT count(*) FROM walrelay_schema_version WHERE version_id > 0 AND is_applied").Scan(&recorded); err != nil {
		t.Fatalf("read walrelay_schema_version: %v", err)
	}
	if recorded != len(applied) {
		t.Errorf("walrelay_schema_version records %d migrations, the first run applied %d", recorded, len(applied))
	}
	for _, m := range applied {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM walrelay_schema_version WHERE version_id = $1::bigint AND is_applied",
			m[1]).Scan(&n); err != nil {
			t.Fatalf("read walrelay_schema_version: %v", err)
		}
		if n != 1 {
			t.Errorf("migration %s is recorded %d times, want once", m[1], n)
		}
	}

	for _, obj := range []struct{ name, kind string }{
		{"walrelay_schema_version", "r"},
		{"outbox_events", "r"},
		{"idx_outbox_events_unprocessed", "i"},
		{"processed_events", "r"},
		{"outbox_events_dead_letters", "v"},
		{"walrelay_slots", "r"},
	} {
		var kind string
		err := conn.QueryRow(ctx, "SELECT relkind::text FROM pg_class WHERE oid = to_regclass($1)", obj.name).Scan(&kind)
		if err != nil {
			t.Errorf("%s: not found (%v)", obj.name, err)
			continue
		}
		if kind != obj.kind {
			t.Errorf("%s has relkind %q, want %q", obj.name, kind, obj.kind)
		}
	}

	var indexDef string
	if err := conn.QueryRow(ctx, "SELECT indexdef FROM pg_indexes WHERE indexname = 'idx_outbox_events_unprocessed'").Scan(&indexDef); err != nil {
		t.Fatalf("read idx_outbox_events_unprocessed: %v", err)
	}
	if !strings.Contains(indexDef, "outbox_events") || !strings.Contains(indexDef, "WHERE (processed_at IS NULL)") {
		t.Errorf("idx_outbox_events_unprocessed is not the partial index on pending rows: %s", indexDef)
	}

	var ins, upd, del bool
	if err := conn.QueryRow(ctx, "SELECT pubinsert, pubupdate, pubdelete FROM pg_publication WHERE pubname = 'walrelay'").
		Scan(&ins, &upd, &del); err != nil {
		t.Fatalf("read publication walrelay: %v", err)
	}
	if !ins || upd || del {
		t.Errorf("publication walrelay: pubinsert=%t pubupdate=%t pubdelete=%t, want inserts only", ins, upd, del)
	}
	var tables []string
	rows, err := conn.Query(ctx, "SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = 'walrelay'")
	if err != nil {
		t.Fatalf("read publication tables: %v", err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatalf("read publication tables: %v", err)
		}
		tables = append(tables, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read publication tables: %v", err)
	}
	if len(tables) != 1 || tables[0] != "public.outbox_events" {
		t.Errorf("publication walrelay covers %v, want [public.outbox_events]", tables)
	}
}

// TestMigrateSharesConfigFileWithRun: one YAML file configures every subcommand, as
// the environment does; migrate skips the settings that are run's.
func TestMigrateSharesConfigFileWithRun(t *testing.T) {
	t.Parallel()
	dbURL := testenv.Database(t)
	config := writeFile(t, "walrelay.yaml", "database-url: "+dbURL+"\n"+
		"kafka-brokers: [127.0.0.1:9092, 127.0.0.1:9093]\n"+
		"slot: orders\n"+
		"topic-template: outbox.{aggregate_type}\n"+
		"status-interval: 250ms\n")
	res := run(t, time.Minute, baseEnv(), "migrate", "--config", config)
	if res.code != 0 || !strings.Contains(res.stdout, "applied migration") {
		t.Fatalf("migrate --config: exit code %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
}

// articleInsert is the article's application INSERT, unchanged: walrelay's columns
// must leave it working.
const articleInsert = `INSERT INTO outbox_events
            (aggregate_type, aggregate_id, event_type, payload)
        VALUES ($1, $2, $3, $4)`

// execFile runs a testdata SQL file.
func execFile(t *testing.T, conn *pgx.Conn, name string) {
	t.Helper()
	sql, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), string(sql)); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// catalog describes every object of the database's public schema and every
// publication: what migrate may change.
func catalog(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var out string
	err := conn.QueryRow(context.Background(), `SELECT concat_ws(E'\n',
		(SELECT string_agg(c.relname || ' ' || c.relkind::text || ' ' || coalesce(pg_get_viewdef(c.oid), '') ||
			coalesce(pg_get_indexdef(c.oid), ''), E'\n' ORDER BY c.relname)
			FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'i', 'S')),
		(SELECT string_agg(a.attrelid::regclass || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) ||
			' ' || a.attnotnull::text || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), ''), E'\n' ORDER BY a.attrelid::regclass::text, a.attnum)
			FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
			LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
			WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v') AND a.attnum > 0 AND NOT a.attisdropped),
		(SELECT string_agg(p.pubname || ' ' || coalesce(t.schemaname || '.' || t.tablename, '-'), E'\n' ORDER BY 1)
			FROM pg_publication p LEFT JOIN pg_publication_tables t ON t.pubname = p.pubname))`).Scan(&out)
	if err != nil {
		t.Fatalf("read catalog: %v", err)
	}
	return out
}

func columnExists(t *testing.T, conn *pgx.Conn, table, column string) bool {
	t.Helper()
	var ok bool
	if err := conn.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_attribute
		WHERE attrelid = to_regclass($1) AND attname = $2 AND NOT attisdropped)`, table, column).Scan(&ok); err != nil {
		t.Fatalf("look up %s.%s: %v", table, column, err)
	}
	return ok
}

func relationExists(t *testing.T, conn *pgx.Conn, name string) bool {
	t.Helper()
	var ok bool
	if err := conn.QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL", name).Scan(&ok); err != nil {
		t.Fatalf("look up %s: %v", name, err)
	}
	return ok
}

// TestMigrateAdoptsArticleTable: the article's schema with pending and processed rows.
// Its own outbox_dead_letters view (it means attempts >= 5) stays as it is beside
// walrelay's, named after the table; migrate adopts the table, the application's
// INSERT still works, and `walrelay run` publishes the pending rows and not the
// processed ones.
func TestMigrateAdoptsArticleTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := testenv.Database(t)
	conn := testenv.Connect(t, dbURL)
	execFile(t, conn, "article_outbox.sql")
	var pending, processed []string
	for i := 0; i < 6; i++ {
		var id string
		if err := conn.QueryRow(ctx, articleInsert+" RETURNING id::text", "order", fmt.Sprintf("order-%d", i%3), "order.created",
			fmt.Sprintf(`{"n": %d}`, i)).Scan(&id); err != nil {
			t.Fatalf("article insert: %v", err)
		}
		if i%2 == 0 {
			pending = append(pending, id)
		} else if _, err := conn.Exec(ctx, "UPDATE outbox_events SET processed_at = now() WHERE id = $1", id); err != nil {
			t.Fatal(err)
		} else {
			processed = append(processed, id)
		}
	}
	articleView := func() string {
		t.Helper()
		var def string
		if err := conn.QueryRow(ctx, "SELECT pg_get_viewdef('outbox_dead_letters'::regclass)").Scan(&def); err != nil {
			t.Fatalf("the article's view: %v", err)
		}
		return def
	}
	before := articleView()

	adopted := run(t, time.Minute, baseEnv(), "migrate", "--database-url", dbURL)
	if adopted.code != 0 {
		t.Fatalf("migrate: exit code %d\nstdout:\n%s\nstderr:\n%s", adopted.code, adopted.stdout, adopted.stderr)
	}
	t.Logf("migrate said:\n%s", adopted.stdout)
	if !strings.Contains(adopted.stdout, "adopting existing table public.outbox_events") ||
		!strings.Contains(adopted.stdout, "was locked ACCESS EXCLUSIVE") {
		t.Errorf("migrate does not say it adopted the table and how long it locked it:\n%s", adopted.stdout)
	}
	for _, col := range []string{"retry_after", "last_error", "dead_lettered_at"} {
		if !columnExists(t, conn, "outbox_events", col) {
			t.Errorf("column %s was not added", col)
		}
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox_events").Scan(&n); err != nil || n != 6 {
		t.Fatalf("outbox_events has %d rows after adoption (%v), want the 6 it had", n, err)
	}
	// walrelay's view, and the article's beside it, unchanged.
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox_events_dead_letters WHERE dead_lettered_at IS NOT NULL").Scan(&n); err != nil {
		t.Errorf("walrelay's outbox_events_dead_letters: %v", err)
	}
	if after := articleView(); after != before {
		t.Errorf("migrate changed the article's view:\nbefore: %s\nafter: %s", before, after)
	}
	again := run(t, time.Minute, baseEnv(), "migrate", "--database-url", dbURL)
	if again.code != 0 || !strings.Contains(again.stdout, "nothing to apply") {
		t.Errorf("migrate again: exit code %d, want nothing to apply\nstdout:\n%s\nstderr:\n%s", again.code, again.stdout, again.stderr)
	}

	// The application's INSERT, unchanged.
	var late string
	if err := conn.QueryRow(ctx, articleInsert+" RETURNING id::text", "order", "order-9", "order.created", `{"late": true}`).Scan(&late); err != nil {
		t.Fatalf("the article's INSERT after migrate: %v", err)
	}
	pending = append(pending, late)

	kafka := testenv.Kafka(t)
	brokers := kafka.ListenAddrs()
	slot := slotName(t, "")
	relay := startProc(t, "relay", relayEnv(dbURL, brokers), "run", "--slot", slot)
	waitStreaming(t, conn, slot, relay)
	var streamed string
	if err := conn.QueryRow(ctx, articleInsert+" RETURNING id::text", "order", "order-1", "order.shipped", `{"streamed": true}`).Scan(&streamed); err != nil {
		t.Fatalf("the article's INSERT while the relay streams: %v", err)
	}
	pending = append(pending, streamed)

	consumer := testenv.NewConsumer(t, brokers, `outbox\..*`)
	if !consumer.WaitFor(time.Minute, func() bool {
		for _, id := range pending {
			if consumer.Count(id) == 0 {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("not every pending row was published: consumed %d distinct of %v", consumer.Distinct(), pending)
	}
	for _, id := range processed {
		if c := consumer.Count(id); c != 0 {
			t.Errorf("row %s, processed before walrelay adopted the table, was published %d times", id, c)
		}
	}
	if consumer.Distinct() != len(pending) {
		t.Errorf("consumed %d distinct events, want the %d pending ones", consumer.Distinct(), len(pending))
	}
	relay.stop(30 * time.Second)
}

// TestMigrateDryRunChangesNothing: --dry-run prints the SQL migrate would run, for a
// fresh database and for the article's table, and the catalog stays as it was.
func TestMigrateDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	dbURL := testenv.Database(t)
	conn := testenv.Connect(t, dbURL)
	before := catalog(t, conn)
	fresh := run(t, time.Minute, baseEnv(), "migrate", "--dry-run", "--database-url", dbURL)
	if fresh.code != 0 {
		t.Fatalf("migrate --dry-run: exit code %d\nstdout:\n%s\nstderr:\n%s", fresh.code, fresh.stdout, fresh.stderr)
	}
	for _, want := range []string{"BEGIN;", "CREATE TABLE IF NOT EXISTS walrelay_slots", `CREATE TABLE "public"."outbox_events"`,
		`CREATE INDEX IF NOT EXISTS "idx_outbox_events_unprocessed"`, `CREATE VIEW "public"."outbox_events_dead_letters"`,
		`CREATE PUBLICATION "walrelay" FOR TABLE "public"."outbox_events" WITH (publish = 'insert')`, "COMMIT;"} {
		if !strings.Contains(fresh.stdout, want) {
			t.Errorf("dry run on a fresh database does not print %q:\n%s", want, fresh.stdout)
		}
	}
	if after := catalog(t, conn); after != before {
		t.Fatalf("migrate --dry-run changed the schema:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	execFile(t, conn, "article_outbox.sql")
	before = catalog(t, conn)
	adopt := run(t, time.Minute, baseEnv(), "migrate", "--dry-run", "--database-url", dbURL)
	if adopt.code != 0 {
		t.Fatalf("migrate --dry-run on the article's table: exit code %d\nstdout:\n%s\nstderr:\n%s", adopt.code, adopt.stdout, adopt.stderr)
	}
	for _, want := range []string{`ALTER TABLE "public"."outbox_events"`, `ADD COLUMN "retry_after" TIMESTAMPTZ`,
		`ADD COLUMN "last_error" TEXT`, `ADD COLUMN "dead_lettered_at" TIMESTAMPTZ`, "ACCESS EXCLUSIVE",
		`CREATE INDEX IF NOT EXISTS "idx_outbox_events_handed_over"`} {
		if !strings.Contains(adopt.stdout, want) {
			t.Errorf("dry run on the article's table does not print %q:\n%s", want, adopt.stdout)
		}
	}
	for _, unwanted := range []string{`ADD COLUMN "attempts"`, `ADD COLUMN "processed_at"`, `"idx_outbox_events_unprocessed"`, "CREATE TABLE \"public\".\"outbox_events\""} {
		if strings.Contains(adopt.stdout, unwanted) {
			t.Errorf("dry run would create %s, which the article's table has:\n%s", unwanted, adopt.stdout)
		}
	}
	if after := catalog(t, conn); after != before {
		t.Fatalf("migrate --dry-run changed the schema:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	t.Logf("dry run on the article's table:\n%s", adopt.stdout)
}

// TestMigrateHonoursTable: a Debezium-shaped table named with --table and the
// --column-* settings is adopted in place: no outbox_events beside it, walrelay's
// bookkeeping columns added, and the application's INSERT unchanged.
func TestMigrateHonoursTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := testenv.Database(t)
	conn := testenv.Connect(t, dbURL)
	execFile(t, conn, "debezium_outbox.sql")
	const debeziumInsert = `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES (gen_random_uuid(), $1, $2, $3, $4)`
	if _, err := conn.Exec(ctx, debeziumInsert, "order", "order-1", "OrderCreated", `{"n": 1}`); err != nil {
		t.Fatal(err)
	}

	// The column settings from the environment, the table from the flag.
	env := baseEnv("WALRELAY_COLUMN_AGGREGATE_TYPE=aggregatetype", "WALRELAY_COLUMN_AGGREGATE_ID=aggregateid",
		"WALRELAY_COLUMN_EVENT_TYPE=type", "WALRELAY_COLUMN_CREATED_AT=")
	res := run(t, time.Minute, env, "migrate", "--database-url", dbURL, "--table", "public.outbox", "--publication", "debezium_outbox")
	if res.code != 0 {
		t.Fatalf("migrate --table public.outbox: exit code %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	if relationExists(t, conn, "outbox_events") {
		t.Errorf("migrate --table outbox created outbox_events beside it")
	}
	for _, col := range []string{"attempts", "processed_at", "retry_after", "last_error", "dead_lettered_at"} {
		if !columnExists(t, conn, "outbox", col) {
			t.Errorf("column outbox.%s was not added", col)
		}
	}
	for _, rel := range []string{"idx_outbox_unprocessed", "idx_outbox_pending_aggregate", "idx_outbox_handed_over",
		"outbox_dead_letters", "walrelay_slots", "processed_events"} {
		if !relationExists(t, conn, rel) {
			t.Errorf("%s was not created", rel)
		}
	}
	var indexDef string
	if err := conn.QueryRow(ctx, "SELECT pg_get_indexdef('idx_outbox_pending_aggregate'::regclass)").Scan(&indexDef); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(indexDef, "ON public.outbox USING btree (aggregatetype, aggregateid)") {
		t.Errorf("the pending-by-aggregate index does not use the configured columns: %s", indexDef)
	}
	var published string
	if err := conn.QueryRow(ctx, `SELECT string_agg(schemaname || '.' || tablename, ',') FROM pg_publication_tables
		WHERE pubname = 'debezium_outbox'`).Scan(&published); err != nil || published != "public.outbox" {
		t.Errorf("publication debezium_outbox covers %q (%v), want public.outbox", published, err)
	}
	if _, err := conn.Exec(ctx, debeziumInsert, "order", "order-1", "OrderShipped", `{"n": 2}`); err != nil {
		t.Fatalf("the application's INSERT after migrate: %v", err)
	}
	var attempts, pending int
	if err := conn.QueryRow(ctx, "SELECT sum(attempts), count(*) FILTER (WHERE processed_at IS NULL) FROM outbox").
		Scan(&attempts, &pending); err != nil || attempts != 0 || pending != 2 {
		t.Errorf("after the INSERT: attempts sum %d, pending %d (%v); want 0 and 2", attempts, pending, err)
	}

	// A column that is not there is named, with the setting that fixes it.
	wrong := run(t, time.Minute, baseEnv(), "migrate", "--database-url", dbURL, "--table", "outbox", "--publication", "debezium_outbox")
	if wrong.code != 1 || !strings.Contains(wrong.stderr, `table public.outbox has no column "aggregate_type"; set --column-aggregate-type`) {
		t.Errorf("migrate with the default column names on Debezium's table: exit code %d\nstderr:\n%s", wrong.code, wrong.stderr)
	}
}

// TestFailedMigrationLeavesSchemaAsItWas: a migration that fails part way (here: a
// transaction of the application's holds a lock on the outbox table past
// --lock-timeout) rolls everything back, walrelay's own tables included, and says
// what to do; the next run, once the lock is gone, succeeds.
func TestFailedMigrationLeavesSchemaAsItWas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := testenv.Database(t)
	conn := testenv.Connect(t, dbURL)
	execFile(t, conn, "article_outbox.sql")
	before := catalog(t, conn)

	holder := testenv.Connect(t, dbURL)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE outbox_events IN ACCESS SHARE MODE"); err != nil {
		t.Fatal(err)
	}
	failed := run(t, time.Minute, baseEnv(), "migrate", "--database-url", dbURL, "--lock-timeout", "300ms")
	if failed.code != 1 {
		t.Fatalf("migrate against a held lock: exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", failed.code, failed.stdout, failed.stderr)
	}
	for _, want := range []string{"lock timeout", "nothing was changed", "pg_stat_activity", "--lock-timeout"} {
		if !strings.Contains(failed.stderr, want) {
			t.Errorf("migrate's error does not say %q:\n%s", want, failed.stderr)
		}
	}
	if after := catalog(t, conn); after != before {
		t.Fatalf("a failed migrate changed the schema:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	ok := run(t, time.Minute, baseEnv(), "migrate", "--database-url", dbURL)
	if ok.code != 0 || !strings.Contains(ok.stdout, "applied migration") {
		t.Fatalf("migrate after the lock was released: exit code %d\nstdout:\n%s\nstderr:\n%s", ok.code, ok.stdout, ok.stderr)
	}
}
