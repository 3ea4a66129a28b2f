package migrations_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/migrations"
)

// migrate says how long each step took, and a concurrent index build says how far
// it is (pg_stat_progress_create_index) while it runs: here while it waits for a
// transaction that writes the table.
func TestMigrateReportsStepsAndIndexProgress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := testenv.Database(t)
	_, out := migrate(t, migrations.Options{DatabaseURL: dbURL})
	if !regexp.MustCompile(`(?m)^applied migration 1 \(00001_walrelay_tables.sql, ran [0-9.]+(µs|ms|s)\)$`).MatchString(out) {
		t.Errorf("migrate does not say how long migration 1 took:\n%s", out)
	}

	conn := testenv.Connect(t, dbURL)
	if _, err := conn.Exec(ctx, `DROP INDEX idx_outbox_events_handed_over;
		INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload) VALUES ('order', '1', 'created', '{}');
		ANALYZE outbox_events`); err != nil {
		t.Fatal(err)
	}
	writer := testenv.Connect(t, dbURL)
	tx, err := writer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
		VALUES ('order', '2', 'created', '{}')`); err != nil {
		t.Fatal(err)
	}
	var buf testenv.LogBuffer
	done := make(chan error, 1)
	go func() {
		_, err := migrations.Migrate(ctx, migrations.Options{DatabaseURL: dbURL, LargeTable: 0.5, Out: &buf,
			ProgressEvery: 50 * time.Millisecond})
		done <- err
	}()
	progress := regexp.MustCompile(`(?m)^  building index idx_outbox_events_handed_over: waiting for writers before build; waited for 0 of 1 transactions$`)
	if !testenv.Eventually(30*time.Second, func() bool { return progress.MatchString(buf.String()) }) {
		t.Fatalf("no progress line while the build waits for the writer:\n%s", buf.String())
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("migrate: %v\n%s", err, buf.String())
	}
	if !regexp.MustCompile(`(?m)^ran CREATE INDEX CONCURRENTLY IF NOT EXISTS "idx_outbox_events_handed_over" .* \([0-9.]+(ms|s)\)$`).MatchString(buf.String()) {
		t.Errorf("migrate does not say how long the index build took:\n%s", buf.String())
	}
	if exists, valid := indexValid(t, dbURL, "idx_outbox_events_handed_over"); !exists || !valid {
		t.Errorf("idx_outbox_events_handed_over: exists %t, valid %t", exists, valid)
	}
}
