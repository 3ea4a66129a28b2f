package relay_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testenv"
)

// dropSlot drops a slot once the walsender of a stopped relay let go of it.
func dropSlot(t testing.TB, conn *pgx.Conn, slot string) {
	t.Helper()
	waitFor(t, 30*time.Second, "the walsender to release slot "+slot, func() bool {
		return count(t, conn, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND active", slot) == 0
	})
	execSQL(t, conn, "SELECT pg_drop_replication_slot($1)", slot)
}

// A slot walrelay did not create (Debezium's, as docs/debezium.md moves over): the
// relay adopts it, so --on-publish progress records horizons, the pending view
// empties, no warning says the slot is another instance's, and a later loss of the
// slot is reported and closed by a catch-up pass (docs/design.md invariants 9, 10).
func TestAdoptedSlotRecordsHorizons(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	execSQL(t, conn, "SELECT pg_create_logical_replication_slot('dbz_outbox', 'pgoutput')")
	evs := testenv.WriteTx(t, conn, aggregates("dbz", 3), "after.slot", 10, false)
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	fast := func(c *config) { c.ProgressInterval = 100 * time.Millisecond }

	rn := start(t, dbURL, broker, "dbz_outbox", fast)
	if !consumer.WaitDistinct(30*time.Second, len(evs)) {
		t.Fatalf("delivered %d of %d from the adopted slot", consumer.Distinct(), len(evs))
	}
	waitFor(t, 30*time.Second, "the pending view to empty", func() bool {
		return count(t, conn, "SELECT count(*) FROM outbox_events_pending") == 0
	})
	if got := count(t, conn, "SELECT count(*) FROM walrelay_progress WHERE slot_name = 'dbz_outbox'"); got != 1 {
		t.Errorf("%d horizons recorded for the adopted slot, want 1", got)
	}
	rn.stop()
	if logs := rn.logs.String(); strings.Contains(logs, "not recording the published horizon") {
		t.Errorf("the relay stopped recording horizons of the slot it adopted:\n%s", logs)
	}

	// Lost later: news, and the rows committed meanwhile come by a catch-up pass.
	dropSlot(t, conn, "dbz_outbox")
	lost := testenv.WriteTx(t, conn, aggregates("dbz", 3), "while.lost", 5, false)
	rn = start(t, dbURL, broker, "dbz_outbox", fast)
	if !consumer.WaitDistinct(30*time.Second, len(evs)+len(lost)) {
		t.Fatalf("after the adopted slot was lost: %d of %d delivered", consumer.Distinct(), len(evs)+len(lost))
	}
	if !rn.waitLog(10*time.Second, "replication slot lost") {
		t.Error("the loss of the adopted slot was not reported")
	}
	for _, ev := range evs {
		if got := consumer.Count(ev.ID); got != 1 {
			t.Errorf("event %s, published before the loss, delivered %d times, want once", ev.ID, got)
		}
	}
}
