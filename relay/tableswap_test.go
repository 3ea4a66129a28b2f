package relay_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/replication"
)

// The outbox table renamed away and a new one created under its name while the relay
// streams: the new table is not in the publication, so its inserts never reach the
// stream. The relay must stop with a setup error before it confirms past them, and
// refuse the replaced table on the next start too.
func TestOutboxTableReplacedUnderTheStream(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	broker := testenv.Kafka(t)
	conn := testenv.Connect(t, dbURL)
	ctx := context.Background()
	rn := start(t, dbURL, broker, "swapped")
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	before := testenv.WriteTx(t, conn, []string{"a"}, "before", 10, false)
	if !consumer.WaitDistinct(time.Minute, len(before)) {
		t.Fatalf("%d of %d events before the swap", consumer.Distinct(), len(before))
	}

	if _, err := conn.Exec(ctx, `ALTER TABLE outbox_events RENAME TO outbox_events_old;
		CREATE TABLE outbox_events (LIKE outbox_events_old INCLUDING ALL)`); err != nil {
		t.Fatal(err)
	}
	afterSwap := testenv.CurrentLSN(t, conn)
	testenv.WriteTx(t, conn, []string{"a"}, "after", 10, false)

	var err error
	select {
	case err = <-rn.done:
		close(rn.done)
	case <-time.After(time.Minute):
		t.Fatal("the relay went on streaming after its outbox table was replaced")
	}
	var setupErr *replication.SetupError
	if !errors.As(err, &setupErr) || !strings.Contains(err.Error(), "was replaced") {
		t.Fatalf("Run returned %v, want a setup error saying the table was replaced", err)
	}
	// Up to afterSwap is allowed: the walsender may send the swap's commit before the
	// commit is visible to the relay's table check, which then passes once more. Every
	// insert into the new table comes after afterSwap, so none is confirmed.
	if confirmed := testenv.SlotLSN(t, conn, "swapped"); confirmed > afterSwap {
		t.Errorf("the slot confirmed %s, past the swap (WAL at %s after it)", confirmed, afterSwap)
	}

	// Added to the publication, the new table is still not the one the slot streamed.
	if _, err := conn.Exec(ctx, "ALTER PUBLICATION walrelay ADD TABLE outbox_events"); err != nil {
		t.Fatal(err)
	}
	again := start(t, dbURL, broker, "swapped")
	select {
	case err = <-again.done:
		close(again.done)
	case <-time.After(time.Minute):
		t.Fatal("the relay started streaming the replaced table")
	}
	if !errors.As(err, &setupErr) || !strings.Contains(err.Error(), "pg_drop_replication_slot('swapped')") {
		t.Fatalf("restart: Run returned %v, want a setup error naming the fix", err)
	}
}
