package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/migrations"
	"github.com/walrelay/walrelay/ops"
	"github.com/walrelay/walrelay/relay"
)

// Rows whose xmin is between 3·2^30 and 2^32 xids old (3.7 to 5.0 days at 10,000
// xid/s, inside the default retention): published ones are not pending, retirement
// deletes them although their creation time is recent, and in poll mode they are
// due (age(xmin) wrapped past 2^31 and left them never due). The xid counter is
// moved with pg_resetwal on a cluster of the test's own (docs/design.md
// invariant 10).
func TestXidWideningAtHighXidAges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg, dbURL := ownCluster(t, "", nil)
	broker := testenv.Kafka(t)
	conn := testenv.Connect(t, dbURL)
	if _, err := migrations.Migrate(ctx, migrations.Options{DatabaseURL: dbURL, Table: "poll_outbox"}); err != nil {
		t.Fatal(err)
	}

	// Published by a stream relay: its horizon covers them.
	rn := start(t, dbURL, broker, "xid_age", func(c *config) { c.ProgressInterval = 100 * time.Millisecond })
	if !rn.waitLog(30*time.Second, "streaming") {
		t.Fatal("the relay did not stream")
	}
	published := testenv.WriteTx(t, conn, aggregates("old", 5), "old.published", 100, false)
	waitFor(t, 30*time.Second, "the horizon to cover the rows", func() bool {
		return count(t, conn, "SELECT count(*) FROM outbox_events_pending") == 0
	})
	rn.stop()
	// A slot holds the freeze back, and the test needs no more streaming.
	dropSlot(t, conn, "xid_age")
	// Committed after the horizon: pending, whatever their age.
	execSQL(t, conn, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
		SELECT 'order', 'late-' || i, 'old.pending', '{}' FROM generate_series(1, 40) i`)
	// Never published: poll mode's.
	execSQL(t, conn, `INSERT INTO poll_outbox (aggregate_type, aggregate_id, event_type, payload)
		SELECT 'poll', 'p-' || i, 'old.polled', '{}' FROM generate_series(1, 20) i`)

	var next uint64
	if err := conn.QueryRow(ctx, "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint").Scan(&next); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	advance, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := pg.AdvanceXID(advance, next+7<<29); err != nil { // 3.5·2^30 xids on
		t.Fatal(err)
	}
	conn = testenv.Connect(t, dbURL)
	var age int64
	if err := conn.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint - min(xmin::text::bigint)
		FROM outbox_events`).Scan(&age); err != nil {
		t.Fatal(err)
	}
	if age < 3<<30 || age >= 1<<32 {
		t.Fatalf("the oldest row is %d xids old, want between 3·2^30 and 2^32", age)
	}

	t.Run("published rows are not pending", func(t *testing.T) {
		if got := count(t, conn, "SELECT count(*) FROM outbox_events_pending"); got != 40 {
			t.Errorf("%d rows pending, want the 40 committed after the horizon (not the %d published)", got, len(published))
		}
		cfg := relay.DefaultConfig()
		cfg.DatabaseURL, cfg.Slot = dbURL, "xid_age"
		st, err := ops.ReadStatus(ctx, cfg, ops.StatusLimits{})
		if err != nil {
			t.Fatal(err)
		}
		if st.PendingRows != 40 {
			t.Errorf("status: %d pending rows, want 40", st.PendingRows)
		}
	})

	t.Run("retirement bounds the xid age", func(t *testing.T) {
		deleted := retirePublished(t, dbURL, 7*24*time.Hour, 30)
		if deleted != int64(len(published)) {
			t.Errorf("retired %d rows, want the %d published ones older than 3·2^30 xids (created minutes ago)", deleted, len(published))
		}
		if got := count(t, conn, "SELECT count(*) FROM outbox_events WHERE event_type = 'old.pending'"); got != 40 {
			t.Errorf("%d of the 40 pending rows left", got)
		}
	})

	t.Run("poll mode's due test does not wrap past 2^31", func(t *testing.T) {
		consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\.poll`)
		start(t, dbURL, broker, "xid_age_poll", func(c *config) {
			c.Mode, c.Table, c.PollInterval = relay.ModePoll, "poll_outbox", 100*time.Millisecond
		})
		if !consumer.WaitDistinct(30*time.Second, 20) {
			t.Fatalf("poll mode published %d of the 20 rows aged past 2^31 xids", consumer.Distinct())
		}
	})
}
