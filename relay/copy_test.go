package relay_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
)

// A database copied into another cluster with pg_dump and pg_restore brings its
// walrelay_progress along, with the first cluster's xids: there, with the same DDL
// (so the same table OIDs) and lower xids, the horizon would call every row
// published, rows never published and rows written later alike. It is ignored, and
// said so: the pending view counts every row not marked, retirement deletes none, the
// relay's catch-up pass
// publishes them all, and a new row is pending until it is published
// (docs/design.md invariant 10).
func TestCopiedHorizonIsIgnored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pgA, urlA := ownCluster(t, "", nil)
	_, urlB := ownCluster(t, "", nil)
	connA, connB := testenv.Connect(t, urlA), testenv.Connect(t, urlB)
	var oidA, oidB uint32
	if err := connA.QueryRow(ctx, "SELECT 'outbox_events'::regclass::oid").Scan(&oidA); err != nil {
		t.Fatal(err)
	}
	if err := connB.QueryRow(ctx, "SELECT 'outbox_events'::regclass::oid").Scan(&oidB); err != nil {
		t.Fatal(err)
	}
	if oidA != oidB {
		t.Fatalf("outbox_events has OID %d in one cluster and %d in the other; the test wants the same DDL to give the same OIDs", oidA, oidB)
	}
	// The first cluster has run more transactions than the copy will have.
	execSQL(t, connA, "DO $$ BEGIN FOR i IN 1..2000 LOOP PERFORM pg_current_xact_id(); COMMIT; END LOOP; END $$")

	brokerA := testenv.Kafka(t)
	fast := func(c *config) { c.ProgressInterval = 100 * time.Millisecond }
	rn := start(t, urlA, brokerA, "copied", fast)
	if !rn.waitLog(30*time.Second, "streaming") {
		t.Fatal("the relay did not stream")
	}
	published := testenv.WriteTx(t, connA, aggregates("copy", 4), "published.in.a", 20, false)
	waitFor(t, 30*time.Second, "the horizon to cover the rows", func() bool {
		return count(t, connA, "SELECT count(*) FROM outbox_events_pending") == 0
	})
	rn.stop()
	pending := testenv.WriteTx(t, connA, aggregates("copy", 4), "pending.in.a", 10, false)

	dump := filepath.Join(t.TempDir(), "a.dump")
	for _, cmd := range []*exec.Cmd{
		exec.CommandContext(ctx, filepath.Join(pgA.BinDir(), "pg_dump"), "--format=custom", "--data-only",
			"--exclude-table-data=walrelay_schema_version", "--file="+dump, urlA),
		exec.CommandContext(ctx, filepath.Join(pgA.BinDir(), "pg_restore"), "--data-only", "--dbname="+urlB, dump),
	} {
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
	}
	all := len(published) + len(pending)
	if got := count(t, connB, "SELECT count(*) FROM outbox_events_pending"); got != all {
		t.Errorf("the copy's pending view counts %d rows, want all %d not marked", got, all)
	}
	later := testenv.WriteTx(t, connB, []string{"later"}, "written.in.b", 1, false)
	if got := count(t, connB, "SELECT count(*) FROM outbox_events_pending WHERE event_type = 'written.in.b'"); got != 1 {
		t.Errorf("a row written in the copy counts as published before any relay there published it")
	}

	if retired := retirePublished(t, urlB, 0, 1000); retired != 0 {
		t.Errorf("retirement in the copy deleted %d rows, want none: nothing was published from it", retired)
	}

	brokerB := testenv.Kafka(t)
	consumer := testenv.NewConsumer(t, brokerB.ListenAddrs(), `outbox\.event\..*`)
	rn = start(t, urlB, brokerB, "copied", fast)
	if !consumer.WaitDistinct(30*time.Second, all+len(later)) {
		t.Fatalf("the copy's relay delivered %d of %d", consumer.Distinct(), all+len(later))
	}
	for _, ev := range pending {
		if consumer.Count(ev.ID) == 0 {
			t.Errorf("event %s, pending when the database was copied, not delivered", ev.ID)
		}
	}
	if !rn.waitLog(10*time.Second, "ignoring a published horizon recorded in another database cluster") {
		t.Error("the relay did not say it ignored the copied horizon")
	}
	// Logged before the pass began, so it is in the logs by now if at all.
	if strings.Contains(rn.logs.String(), "events of about the last progress interval") {
		t.Error("the slot-loss message promises about one progress interval of repeats, though every row is published again")
	}
}

// pg_upgrade gives the cluster a new system identifier but keeps every row's xmin
// and the xid counter: the horizon still speaks for the database. After the upgrade
// the pending view counts only the rows written after it, and the catch-up pass of
// the slot the upgrade left behind publishes only those (docs/design.md
// invariant 10).
func TestUpgradedClusterKeepsHorizons(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg, dbURL := ownCluster(t, "", nil)
	broker := testenv.Kafka(t)
	conn := testenv.Connect(t, dbURL)
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	fast := func(c *config) { c.ProgressInterval = 100 * time.Millisecond }
	rn := start(t, dbURL, broker, "upgraded", fast)
	if !rn.waitLog(30*time.Second, "streaming") {
		t.Fatal("the relay did not stream")
	}
	published := testenv.WriteTx(t, conn, aggregates("up", 4), "before.upgrade", 20, false)
	waitFor(t, 30*time.Second, "the horizon to cover the rows", func() bool {
		return count(t, conn, "SELECT count(*) FROM outbox_events_pending") == 0
	})
	rn.stop()
	pending := testenv.WriteTx(t, conn, aggregates("up", 4), "pending.at.upgrade", 10, false)
	dropSlot(t, conn, "upgraded") // pg_upgrade before PostgreSQL 17 leaves slots behind; 17 wants them caught up
	var before string
	if err := conn.QueryRow(ctx, "SELECT walrelay_system_id()").Scan(&before); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	upgrade, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := pg.Upgrade(upgrade); err != nil {
		t.Fatal(err)
	}
	conn = testenv.Connect(t, dbURL)
	var after string
	if err := conn.QueryRow(ctx, "SELECT walrelay_system_id()").Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after == before {
		t.Fatalf("the upgraded cluster kept system identifier %s; the test wants a new one", after)
	}
	if got := count(t, conn, "SELECT count(*) FROM outbox_events_pending"); got != len(pending) {
		t.Errorf("%d rows pending after the upgrade, want the %d written after the horizon", got, len(pending))
	}
	rn = start(t, dbURL, broker, "upgraded", fast)
	if !consumer.WaitDistinct(30*time.Second, len(published)+len(pending)) {
		t.Fatalf("after the upgrade: %d of %d delivered", consumer.Distinct(), len(published)+len(pending))
	}
	if !rn.waitLog(10*time.Second, "catch-up pass done") {
		t.Fatal("no catch-up pass after the upgrade")
	}
	for _, ev := range published {
		if got := consumer.Count(ev.ID); got != 1 {
			t.Fatalf("event %s, below the horizon before the upgrade, delivered %d times, want once", ev.ID, got)
		}
	}
}
