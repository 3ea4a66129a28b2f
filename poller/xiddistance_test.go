package poller_test

import (
	"context"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/poller"
)

// The poll-only due test measures an xid's age with age(), widened to the window of
// walrelay_full_xid: for every distance from the base, at the window's edges and at
// 2^31, where age() alone wraps, it says what walrelay_full_xid says.
func TestXidDistanceIsFullXidWindow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := testenv.Connect(t, testenv.MigratedDatabase(t))
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var base int64 // the transaction's own xid, which age() then counts from
	if err := tx.QueryRow(ctx, "SELECT txid_current()").Scan(&base); err != nil {
		t.Fatal(err)
	}
	const window = 1<<32 - 1<<20
	for _, back := range []int64{0, 1, 1000, 1 << 20, 1<<31 - 1, 1 << 31, 1<<31 + 1, 3 << 30,
		window - 1, window, window + 1, 1<<32 - 1, -1, -1000, -(1<<20 - 1)} {
		x := ((base-back)%(1<<32) + 1<<32) % (1 << 32)
		if x < 3 {
			continue // a special xid: checked below
		}
		var got, full int64
		if err := tx.QueryRow(ctx, "SELECT "+poller.XidDistance("$1::bigint::text::xid")+", $2 - walrelay_full_xid($1::bigint::text::xid, $2)",
			x, base).Scan(&got, &full); err != nil {
			t.Fatal(err)
		}
		want := back
		if back > window {
			want = back - 1<<32 // too old: it wraps to after the base
		}
		if got != full || got != want {
			t.Errorf("xid %d back from the base: distance %d, walrelay_full_xid's %d, want %d", back, got, full, want)
		}
	}
	var frozen int64
	if err := tx.QueryRow(ctx, "SELECT "+poller.XidDistance("'2'::xid")).Scan(&frozen); err != nil {
		t.Fatal(err)
	}
	if frozen != 1<<31-1 {
		t.Errorf("the frozen xid's distance is %d, want 2^31 − 1", frozen)
	}
}
