package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
)

// restartRepeatsFrom is the first major version that keeps a logical slot's
// confirmed position over a clean shutdown: PostgreSQL 17 writes slots whose
// confirmed_flush_lsn moved at the shutdown checkpoint. Before 17 the slot on disk
// keeps the position it last saved, which only moves when the slot's restart_lsn or
// catalog xmin does, so a clean restart resends what was confirmed since then.
const restartRepeatsFrom = 17

// How many events a clean restart of PostgreSQL (fast shutdown, start) makes the
// relay publish again, once with the relay streaming through the restart and once
// with the relay stopped before it. A relay stopped first recorded what it confirmed
// as it stopped (walrelay_confirmed) and resumes there: nothing is repeated on any
// version. From 17 on the slot itself comes back where it was confirmed, and nothing
// is repeated either way; before 17 the streaming figure is logged (README,
// "PostgreSQL versions"; its bound is TestFastServerRestartRepeatsWithinBound's).
// At-least-once either way: nothing may be lost. A cluster of its own, as the
// restart would cut off other tests' relays.
func TestCleanServerRestartRepeats(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pg, dbURL := ownCluster(t, "", nil)
	major := pg.ServerVersionNum() / 10000
	broker := testenv.Kafka(t)
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	// One aggregate, so one partition: what the relay publishes again after the
	// restart arrives before the marker written after it.
	aggs := []string{"restart"}
	const txs, perTx = 20, 5
	var written []outbox.Event

	// confirmedBurst writes txs transactions and waits until they are delivered and
	// the slot confirmed past them.
	confirmedBurst := func(conn *pgx.Conn, round string) {
		for range txs {
			written = append(written, testenv.WriteTx(t, conn, aggs, round, perTx, false)...)
		}
		end := testenv.CurrentLSN(t, conn)
		if !consumer.WaitDistinct(time.Minute, len(written)) {
			t.Fatalf("%s: delivered %d of %d", round, consumer.Distinct(), len(written))
		}
		waitFor(t, time.Minute, round+": the slot to confirm the burst", func() bool {
			return testenv.SlotLSN(t, conn, "restart") >= end
		})
	}
	restart := func() *pgx.Conn {
		if err := pg.Stop(); err != nil {
			t.Fatal(err)
		}
		if err := pg.StartAgain(ctx); err != nil {
			t.Fatal(err)
		}
		return testenv.Connect(t, dbURL)
	}
	// repeatsAfter writes a marker and, once it arrived, counts the events of round
	// delivered more than once.
	repeatsAfter := func(conn *pgx.Conn, round string) int {
		marker := testenv.WriteTx(t, conn, aggs, round+".marker", 1, false)[0]
		written = append(written, marker)
		if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(marker.ID) > 0 }) {
			t.Fatalf("%s: the marker written after the restart was not delivered", round)
		}
		n := 0
		for _, ev := range written {
			if ev.EventType == round {
				n += consumer.Count(ev.ID) - 1
			}
		}
		return n
	}

	// A first burst moves the slot past the position it was created at (its first
	// restart_lsn change saves it), so both rounds measure a slot in steady state.
	rn := start(t, dbURL, broker, "restart")
	conn := testenv.Connect(t, dbURL)
	confirmedBurst(conn, "warmup")

	// Round 1: the relay stops first, so the slot's position after the restart can be
	// read before anyone streams it; a new relay then resumes from it.
	confirmedBurst(conn, "stopped")
	rn.stop()
	// Once the walsender is gone it has applied the relay's last status update.
	waitFor(t, time.Minute, "the slot to be released", func() bool {
		var active bool
		if err := conn.QueryRow(ctx, "SELECT active FROM pg_replication_slots WHERE slot_name = 'restart'").Scan(&active); err != nil {
			t.Fatal(err)
		}
		return !active
	})
	before := testenv.SlotLSN(t, conn, "restart")
	conn = restart()
	after := testenv.SlotLSN(t, conn, "restart")
	start(t, dbURL, broker, "restart")
	stopped := repeatsAfter(conn, "stopped")

	// Round 2: the relay streams through the restart and reconnects by itself. Last,
	// because its first replication session after the restart may fail once more on a pooled
	// connection the shutdown terminated, and resend from the slot again.
	confirmedBurst(conn, "streaming")
	conn = restart()
	streaming := repeatsAfter(conn, "streaming")

	t.Logf("PostgreSQL %d (server_version_num %d), %d transactions of %d events confirmed, then a clean restart: "+
		"relay stopped before it: confirmed_flush_lsn %s before, %s after (%d bytes back), %d events published again; relay streaming through it: %d events published again",
		major, pg.ServerVersionNum(), txs, perTx, before, after, int64(before)-int64(after), stopped, streaming)

	for _, ev := range written {
		if consumer.Count(ev.ID) == 0 {
			t.Errorf("event %s (%s) lost", ev.ID, ev.EventType)
		}
	}
	if stopped != 0 {
		t.Errorf("PostgreSQL %d: a clean restart with the relay stopped first repeated %d events, want 0: the relay's "+
			"record of what it confirmed should take it past the slot's saved position", major, stopped)
	}
	if major < restartRepeatsFrom {
		return // the streaming round's repeats are allowed; the figures above go to the README
	}
	if streaming != 0 || stopped != 0 {
		t.Errorf("PostgreSQL %d: a clean restart repeated %d events (relay stopped) and %d (relay streaming), want 0: the shutdown checkpoint should keep the slot's confirmed position",
			major, stopped, streaming)
	}
	if after != before {
		t.Errorf("PostgreSQL %d: confirmed_flush_lsn %s before the clean restart, %s after; want it kept", major, before, after)
	}
}
