package main_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMigrateTwice(t *testing.T) {
	t.Parallel()
	dbURL := testenv.Database(t)

	first := run(t, time.Minute, baseEnv(), "migrate", "--database-url", dbURL)
	if first.code != 0 {
		t.Fatalf("first migrate: exit code %d\nstdout:\n%s\nstderr:\n%s", first.code, first.stdout, first.stderr)
	}
	applied := regexp.MustCompile(`(?m)^applied migration (\d+) \(\S+\.sql\)$`).FindAllStringSubmatch(first.stdout, -1)
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
		{"idx_outbox_unprocessed", "i"},
		{"processed_events", "r"},
		{"outbox_dead_letters", "v"},
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
	if err := conn.QueryRow(ctx, "SELECT indexdef FROM pg_indexes WHERE indexname = 'idx_outbox_unprocessed'").Scan(&indexDef); err != nil {
		t.Fatalf("read idx_outbox_unprocessed: %v", err)
	}
	if !strings.Contains(indexDef, "outbox_events") || !strings.Contains(indexDef, "WHERE (processed_at IS NULL)") {
		t.Errorf("idx_outbox_unprocessed is not the partial index on pending rows: %s", indexDef)
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
