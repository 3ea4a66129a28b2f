package catalog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/testenv"
)

// A takeover during a catch-up pass: the new leader records the slot again; the
// deposed leader finishing its own pass afterwards must not mark the new pass done,
// or a crash of the new leader mid-pass would skip the rows only its pass covers.
func TestDeposedLeaderCannotFinishNewCatchup(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := testenv.Connect(t, testenv.MigratedDatabase(t))

	deposed, err := catalog.RecordSlot(ctx, conn, "takeover")
	if err != nil {
		t.Fatal(err)
	}
	current, err := catalog.RecordSlot(ctx, conn, "takeover")
	if err != nil {
		t.Fatal(err)
	}
	if !current.After(deposed) {
		t.Fatalf("second creation %v not after the first %v", current, deposed)
	}
	if err := catalog.MarkCatchupDone(ctx, conn, "takeover", deposed, nil); !errors.Is(err, catalog.ErrSlotRecreated) {
		t.Fatalf("deposed leader marking done: err = %v, want ErrSlotRecreated", err)
	}
	var done *time.Time
	if err := conn.QueryRow(ctx, "SELECT catchup_done_at FROM walrelay_slots WHERE slot_name = 'takeover'").Scan(&done); err != nil {
		t.Fatal(err)
	}
	if done != nil {
		t.Fatalf("the new leader's pass was marked done by the deposed leader at %v", done)
	}
	if err := catalog.MarkCatchupDone(ctx, conn, "takeover", current, nil); err != nil {
		t.Fatalf("current leader marking done: %v", err)
	}
	if err := conn.QueryRow(ctx, "SELECT catchup_done_at FROM walrelay_slots WHERE slot_name = 'takeover'").Scan(&done); err != nil {
		t.Fatal(err)
	}
	if done == nil {
		t.Fatal("the current leader's pass was not marked done")
	}
}
