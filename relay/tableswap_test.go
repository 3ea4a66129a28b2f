package relay_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/relay"
)

// The outbox table renamed away and a new one created under its name while the relay
// streams: the new table is not in the publication, so its inserts never reach the
// stream. The relay must stop with a setup error before it confirms past them, and
// refuse the replaced table on the next start too.
func TestOutboxTableReplacedUnderTheStream(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
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
	var setupErr *catalog.SetupError
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

// With several tables, each one's identity is recorded for the slot: the second
// table replaced while no relay ran is refused at the next start, and replaced while
// the relay streams, it stops the relay.
func TestSecondOutboxTableReplaced(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	execSQL(t, conn, `CREATE SCHEMA tenant_b; CREATE TABLE tenant_b.outbox (LIKE outbox_events INCLUDING ALL)`)
	twoTables := func(c *config) {
		c.Publication = "swapped_b"
		c.Tables = []relay.TableConfig{{Table: "outbox_events", Columns: outbox.DefaultColumns()},
			{Table: "tenant_b.outbox", Columns: outbox.DefaultColumns()}}
	}
	swap := func() {
		execSQL(t, conn, `ALTER TABLE tenant_b.outbox RENAME TO outbox_old;
			CREATE TABLE tenant_b.outbox (LIKE tenant_b.outbox_old INCLUDING ALL);
			ALTER PUBLICATION swapped_b ADD TABLE tenant_b.outbox`)
	}
	rn := start(t, dbURL, broker, "swapped_b", twoTables)
	if !rn.waitLog(30*time.Second, "msg=streaming") {
		t.Fatal("the relay did not start streaming")
	}
	rn.stop()
	swap()
	again := start(t, dbURL, broker, "swapped_b", twoTables)
	err := runErr(t, again)
	var setupErr *catalog.SetupError
	if !errors.As(err, &setupErr) || !strings.Contains(err.Error(), "tenant_b.outbox was replaced") {
		t.Fatalf("restart after the swap: Run returned %v, want a setup error saying tenant_b.outbox was replaced", err)
	}

	// A new slot records the new table; replaced again under the stream, it stops the relay.
	execSQL(t, conn, "SELECT pg_drop_replication_slot('swapped_b')")
	third := start(t, dbURL, broker, "swapped_b", twoTables)
	if !third.waitLog(30*time.Second, "msg=streaming") {
		t.Fatal("the relay did not start streaming on a new slot")
	}
	execSQL(t, conn, `DROP TABLE tenant_b.outbox_old`)
	swap()
	testenv.WriteTx(t, conn, []string{"a"}, "after", 1, false) // something to confirm
	if err := runErr(t, third); !errors.As(err, &setupErr) || !strings.Contains(err.Error(), "tenant_b.outbox") {
		t.Fatalf("swap under the stream: Run returned %v, want a setup error naming tenant_b.outbox", err)
	}
}
