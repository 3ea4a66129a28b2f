package chaos_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/walrelay/walrelay/internal/testenv"
)

// The walsender streams a transaction as soon as its commit record is in the WAL. The
// committing session becomes visible to others a moment later; in these tests much
// later: it waits for a synchronous standby that never comes. Meanwhile the relay
// decodes the transaction and writes its bookkeeping, whose UPDATE ... WHERE id = ...
// cannot see the row. Were the outcome settled on that, the slot would confirm past
// the transaction, and once visible its row would stay as it was for good. The
// bookkeeper keeps such outcomes until their transaction is visible (poller.Outcome).

// heldCommit is a transaction whose commit waits for a synchronous standby that never
// connects, so that it is in the WAL (and streamed) but invisible to other sessions.
type heldCommit struct {
	t    *testing.T
	db   *admin
	pid  int
	done chan error
	end  pglogrepl.LSN // the WAL position once it is in, at or past its commit
}

// localCommits makes the sessions opened from now on (the relay's) commit without
// waiting for a standby; run it before the relay starts.
func localCommits(t *testing.T, dbURL string) {
	t.Helper()
	execAdmin(t, dbURL, "ALTER DATABASE walrelay SET synchronous_commit = local")
}

func execAdmin(t *testing.T, dbURL, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// holdCommit runs sql in a session of its own whose commit waits for a standby named
// never_connects (sessions opened after localCommits do not wait).
func holdCommit(t *testing.T, dbURL string, db *admin, sql string, args ...any) *heldCommit {
	t.Helper()
	ctx := context.Background()
	execAdmin(t, dbURL, "ALTER SYSTEM SET synchronous_standby_names = 'never_connects'")
	execAdmin(t, dbURL, "SELECT pg_reload_conf()")
	writer, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { writer.Close(context.Background()) })
	h := &heldCommit{t: t, db: db, done: make(chan error, 1)}
	if err := writer.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&h.pid); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Exec(ctx, "SET synchronous_commit = on"); err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := writer.Exec(ctx, sql, args...)
		h.done <- err
	}()
	var waiting bool
	if !poll(30*time.Second, func() bool {
		return db.queryRow(ctx, "SELECT wait_event = 'SyncRep' FROM pg_stat_activity WHERE pid = $1", []any{h.pid}, &waiting) == nil && waiting
	}) {
		t.Fatal("the commit does not wait for the synchronous standby")
	}
	if h.end, err = db.currentLSN(ctx); err != nil {
		t.Fatal(err)
	}
	return h
}

// confirmedPast waits up to d for the slot to confirm the held commit.
func (h *heldCommit) confirmedPast(slot string, d time.Duration) bool {
	return poll(d, func() bool {
		confirmed, _, err := h.db.slotState(context.Background(), slot)
		return err == nil && confirmed >= h.end
	})
}

// release cancels the wait for the standby: the transaction becomes visible.
func (h *heldCommit) release() {
	h.t.Helper()
	var canceled bool
	if err := h.db.queryRow(context.Background(), "SELECT pg_cancel_backend($1)", []any{h.pid}, &canceled); err != nil || !canceled {
		h.t.Fatalf("cancel the writer's wait for the standby: %v %v", canceled, err)
	}
	if err := <-h.done; err != nil {
		h.t.Fatalf("writer: %v", err)
	}
}

// columnSet waits up to 10s for column of the row with id to be set.
func (h *heldCommit) columnSet(column, id string) bool {
	return poll(10*time.Second, func() bool {
		var at *time.Time
		err := h.db.queryRow(context.Background(), "SELECT "+column+" FROM outbox_events WHERE id = $1", []any{id}, &at)
		return err == nil && at != nil
	})
}

// relayOnOwnCluster starts a cluster whose relay sessions commit locally and a relay
// streaming slot on it, with extra settings.
func relayOnOwnCluster(t *testing.T, slot string, extra ...string) (string, *admin, *kfake.Cluster, *relayRuns) {
	t.Helper()
	_, dbURL := startCluster(t, 10*time.Second)
	db := &admin{url: dbURL}
	t.Cleanup(db.close)
	localCommits(t, dbURL)
	kafka := testenv.Kafka(t)
	relay := newRelayRuns(t, relayEnv(dbURL, strings.Join(kafka.ListenAddrs(), ","), slot, extra...))
	relay.start()
	waitStreaming(t, db, slot, relay, time.Minute)
	return dbURL, db, kafka, relay
}

// An acked row is marked (--on-publish mark) once its transaction is visible.
func TestUnmarkedInvisibleCommit(t *testing.T) {
	dbURL, db, kafka, relay := relayOnOwnCluster(t, "unmarked", "WALRELAY_ON_PUBLISH=mark") // the marks are what this tests
	consumer := testenv.NewConsumer(t, kafka.ListenAddrs(), `outbox\.event\..*`)
	const id = "11111111-1111-4111-8111-111111111111"
	held := holdCommit(t, dbURL, db, `INSERT INTO outbox_events
		(id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'order', 'o-1', 'order.created', '{"n": 1}')`, id)
	if !consumer.WaitDistinct(30*time.Second, 1) {
		t.Fatal("the event was not delivered while its commit waited for the standby")
	}
	if held.confirmedPast("unmarked", 3*time.Second) {
		t.Error("the slot confirmed the transaction while its row was invisible, before the row was marked")
	}
	held.release()
	if !held.columnSet("processed_at", id) {
		t.Errorf("event %s was published, but its row is still pending (processed_at NULL) 10s after it became visible", id)
	}
	relay.stop(30 * time.Second)
}

// A row the decoder cannot map (here: created_at infinity) is a dead letter once its
// transaction is visible, and its LSN is not confirmed before; under --on-publish
// progress a row left as it was would count as published, with no event.
func TestDeadLetterOfInvisibleCommit(t *testing.T) {
	dbURL, db, _, relay := relayOnOwnCluster(t, "invisible")
	const id = "22222222-2222-4222-8222-222222222222"
	held := holdCommit(t, dbURL, db, `INSERT INTO outbox_events
		(id, aggregate_type, aggregate_id, event_type, payload, created_at) VALUES ($1, 'order', 'o-1', 'order.created', '{}', 'infinity')`, id)
	if !poll(30*time.Second, func() bool { return relay.logCount("outbox row cannot become an event") > 0 }) {
		t.Fatal("the relay did not decode the unmappable row while its commit waited for the standby")
	}
	if held.confirmedPast("invisible", 3*time.Second) {
		t.Error("the slot confirmed the transaction while its row was invisible, before the row was dead-lettered")
	}
	held.release()
	if !held.columnSet("dead_lettered_at", id) {
		t.Errorf("the unmappable row %s is no dead letter 10s after it became visible: it counts as published, with no event", id)
	}
	if !held.confirmedPast("invisible", 10*time.Second) {
		t.Error("the slot did not confirm the transaction once its row was a dead letter")
	}
	relay.stop(30 * time.Second)
}
