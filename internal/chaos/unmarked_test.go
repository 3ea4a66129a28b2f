package chaos_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testenv"
)

// TestUnmarkedInvisibleCommit guards against a bug the chaos suite found.
//
// The walsender streams a transaction as soon as its commit record is in the WAL. The
// committing session becomes visible to others a moment later; here, much later: it
// waits for a synchronous standby that never comes. Meanwhile the relay publishes the
// event, and its bookkeeping runs UPDATE ... SET processed_at = now() WHERE id =
// ANY(...), which cannot see the row, changes nothing, commits, and the event counts
// as settled: the slot confirms past it. Once the transaction is visible, its row
// stayed pending (processed_at NULL) for good, though it was published. Under load on
// a server without synchronous replication the same happened now and then. Now the
// bookkeeper marks with RETURNING, keeps rows it did not find for a later batch, and
// settles them only once marked: this test checks the row ends up marked.
func TestUnmarkedInvisibleCommit(t *testing.T) {
	ctx := context.Background()
	_, dbURL := startCluster(t, 10*time.Second)
	db := &admin{url: dbURL}
	t.Cleanup(db.close)
	// Every session but the test's writer commits without waiting for a standby.
	exec := func(sql string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("ALTER DATABASE walrelay SET synchronous_commit = local")

	kafka := testenv.Kafka(t)
	relay := newRelayRuns(t, relayEnv(dbURL, strings.Join(kafka.ListenAddrs(), ","), "unmarked", "WALRELAY_ON_PUBLISH=mark")) // the marks are what this tests
	relay.start()
	waitStreaming(t, db, "unmarked", relay, time.Minute)
	consumer := testenv.NewConsumer(t, kafka.ListenAddrs(), `outbox\.event\..*`)

	exec("ALTER SYSTEM SET synchronous_standby_names = 'never_connects'")
	exec("SELECT pg_reload_conf()")
	writer, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { writer.Close(context.Background()) })
	var pid int
	if err := writer.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Exec(ctx, "SET synchronous_commit = on"); err != nil {
		t.Fatal(err)
	}
	const id = "11111111-1111-4111-8111-111111111111"
	done := make(chan error, 1)
	go func() {
		_, err := writer.Exec(ctx, `INSERT INTO outbox_events
			(id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'order', 'o-1', 'order.created', '{"n": 1}')`, id)
		done <- err
	}()
	if !consumer.WaitDistinct(30*time.Second, 1) {
		t.Fatal("the event was not delivered while its commit waited for the standby")
	}
	// The relay confirms the transaction once its bookkeeping committed.
	commitEnd, err := db.currentLSN(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !poll(10*time.Second, func() bool {
		confirmed, _, err := db.slotState(ctx, "unmarked")
		return err == nil && confirmed >= commitEnd
	}) {
		t.Log("the slot did not confirm the transaction while it was invisible (the relay waited: good)")
	}
	var canceled bool
	if err := db.queryRow(ctx, "SELECT pg_cancel_backend($1)", []any{pid}, &canceled); err != nil || !canceled {
		t.Fatalf("cancel the writer's wait for the standby: %v %v", canceled, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("writer: %v", err)
	}
	// The row is visible now; the relay must mark it.
	var processed *time.Time
	if !poll(10*time.Second, func() bool {
		err := db.queryRow(ctx, "SELECT processed_at FROM outbox_events WHERE id = $1", []any{id}, &processed)
		return err == nil && processed != nil
	}) {
		confirmed, _, _ := db.slotState(ctx, "unmarked")
		t.Errorf("event %s was published and the slot confirmed %s (past its commit, WAL was at %s), "+
			"but its row is still pending (processed_at NULL) 10s after it became visible", id, confirmed, commitEnd)
	}
	relay.stop(30 * time.Second)
}
