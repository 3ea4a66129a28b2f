package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
)

// A terminated walsender (SQLSTATE 57P01) and a restart of PostgreSQL both end the
// session; the relay reconnects by itself, resumes from the slot, and loses nothing.
// Not parallel: it restarts the cluster every other test uses.
func TestReconnectsAfterServerFaults(t *testing.T) {
	pg := testenv.Cluster(t)
	if pg == nil {
		t.Log("restart step not run: the tests use an external server (" + testenv.DatabaseURLEnv + ")")
	}
	dbURL, broker, conn := outboxWithBroker(t)
	rn := start(t, dbURL, broker, "faults")
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	aggs := aggregates("ft", 8)

	var written []outbox.Event
	written = append(written, testenv.WriteTx(t, conn, aggs, "before", 50, false)...)
	if !consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("delivered %d of %d", consumer.Distinct(), len(written))
	}

	pid := walsenderPID(t, conn, "faults")
	if _, err := conn.Exec(context.Background(), "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	written = append(written, testenv.WriteTx(t, conn, aggs, "after.terminate", 50, false)...)
	if !consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("after terminating the walsender: delivered %d of %d", consumer.Distinct(), len(written))
	}
	if !rn.waitLog(5*time.Second, "57P01") {
		t.Error("the terminated walsender was not logged with its SQLSTATE")
	}

	if pg != nil {
		if err := pg.Stop(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := pg.StartAgain(ctx); err != nil {
			t.Fatal(err)
		}
		conn = testenv.Connect(t, dbURL)
		written = append(written, testenv.WriteTx(t, conn, aggs, "after.restart", 50, false)...)
		if !consumer.WaitDistinct(time.Minute, len(written)) {
			t.Fatalf("after restarting PostgreSQL: delivered %d of %d", consumer.Distinct(), len(written))
		}
	}
	for _, ev := range written {
		if consumer.Count(ev.ID) == 0 {
			t.Errorf("event %s (%s) lost", ev.ID, ev.EventType)
		}
	}
}

// A slot streamed by another process is reported and waited for; once released, the
// relay takes it and delivers.
func TestWaitsForBusySlot(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)

	hold := holdSlot(t, dbURL, "busy")

	rn := start(t, dbURL, broker, "busy")
	if !rn.waitLog(30*time.Second, "in use by another process") {
		t.Fatal("no log line about the busy slot")
	}
	hold.Close(context.Background())
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	written := testenv.WriteTx(t, conn, []string{"b"}, "after.release", 10, false)
	if !consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("delivered %d of %d after the slot was released", consumer.Distinct(), len(written))
	}
}

// holdSlot creates the slot and streams it on a connection of its own, as another
// relay would, until the returned connection is closed.
func holdSlot(t *testing.T, dbURL, slot string) *pgconn.PgConn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgconn.Connect(ctx, testenv.WithParams(dbURL, map[string]string{"replication": "database"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := pglogrepl.CreateReplicationSlot(ctx, conn, slot, "pgoutput", pglogrepl.CreateReplicationSlotOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names 'walrelay'"},
	}); err != nil {
		t.Fatal(err)
	}
	return conn
}

// One transaction far larger than the window streams through instead of being held.
func TestHugeTransactionStreamsThrough(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	start(t, dbURL, broker, "huge", func(c *config) {
		c.MaxInFlightEvents = 500
		c.MaxInFlightBytes = 64 << 10
	})
	const n = 20000
	if _, err := conn.Exec(context.Background(), `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
		SELECT 'order', 'agg-' || (i % 100), 'bulk', jsonb_build_object('i', i, 'pad', repeat('x', 100))
		FROM generate_series(1, $1) AS i`, n); err != nil {
		t.Fatal(err)
	}
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	if !consumer.WaitDistinct(2*time.Minute, n) {
		t.Fatalf("delivered %d of %d events of one transaction", consumer.Distinct(), n)
	}
}
