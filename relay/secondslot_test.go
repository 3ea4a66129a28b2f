package relay_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/testenv"
)

// exited waits for Run to return and gives its error; false when it still runs.
func (rn *running) exited(timeout time.Duration) (error, bool) {
	select {
	case err := <-rn.done:
		close(rn.done) // stop sees it returned
		return err, true
	case <-time.After(timeout):
		return nil, false
	}
}

// Two slots on one outbox table would share the row's hand-over state (retry_after,
// attempts, processed_at): one relay's poller would publish, to its own broker, an
// event the other's refused, and mark it processed. A relay on a second slot is
// refused at start, before it creates anything, with what to do; also when two
// relays with different slots start at the same moment (docs/design.md
// invariant 10).
func TestSecondSlotOnATableIsRefused(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	rn := start(t, dbURL, broker, "owner_a")
	if !rn.waitLog(30*time.Second, "streaming") {
		t.Fatal("the first relay did not stream")
	}
	second := start(t, dbURL, broker, "second_b")
	err, ok := second.exited(30 * time.Second)
	var setupErr *catalog.SetupError
	if !ok || !errors.As(err, &setupErr) {
		t.Fatalf("a relay on a second slot of the table: Run returned %v (returned: %v), want a setup error", err, ok)
	}
	for _, want := range []string{"outbox table public.outbox_events is streamed by slot owner_a", "--slot owner_a",
		"pg_drop_replication_slot('owner_a')", "DELETE FROM walrelay_table_slots WHERE slot_name = 'owner_a'"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if got := count(t, conn, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'second_b'"); got != 0 {
		t.Errorf("the refused relay created its slot")
	}
	// The first streams on.
	evs := testenv.WriteTx(t, conn, []string{"a"}, "still.streaming", 3, false)
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	if !consumer.WaitDistinct(30*time.Second, len(evs)) {
		t.Fatalf("the first relay delivered %d of %d after the refusal", consumer.Distinct(), len(evs))
	}

	// Two relays with different slots, started at the same moment on a table no slot
	// streams yet: one streams, the other is refused.
	raceURL := testenv.MigratedDatabase(t)
	x, y := start(t, raceURL, broker, "race_x"), start(t, raceURL, broker, "race_y")
	streams := func(r *running) bool { return strings.Contains(r.logs.String(), "msg=streaming") }
	if !testenv.Eventually(30*time.Second, func() bool { return streams(x) || streams(y) }) {
		t.Fatal("neither racing relay streamed")
	}
	loser := y
	if streams(y) {
		loser = x
	}
	err, ok = loser.exited(30 * time.Second)
	if !ok || !errors.As(err, &setupErr) || !strings.Contains(err.Error(), "is streamed by slot race_") {
		t.Fatalf("the other racing relay: Run returned %v (returned: %v), want the refusal", err, ok)
	}
	if streams(loser) {
		t.Error("the refused racing relay streamed")
	}
}
