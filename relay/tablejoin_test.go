package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/migrations"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/relay"
)

// A table added to the list of a relay whose slot exists, as docs/operations.md says
// ("Several outbox tables"): in the publication already, so the slot's stream
// skipped its inserts while the relay did not list it, then the relay restarted
// with the longer list. Every row it held is published, and its pending view does
// not call a row published before that. Taken out of the list and put back, the rows
// written in between are published too (docs/design.md invariant 10).
func TestTableJoiningTheListPublishesItsRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL, broker, conn := outboxWithBroker(t)
	// Created by migrate, which adds it to the publication the relay streams.
	if _, err := migrations.Migrate(ctx, migrations.Options{DatabaseURL: dbURL, Table: "joiner"}); err != nil {
		t.Fatal(err)
	}
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	first := []relay.TableConfig{{Table: "outbox_events", Columns: outbox.DefaultColumns()}}
	both := append(first, relay.TableConfig{Table: "joiner", Columns: outbox.DefaultColumns()})
	withTables := func(tables []relay.TableConfig) func(*config) {
		return func(c *config) { c.Tables, c.ProgressInterval = tables, 100*time.Millisecond }
	}
	insertJoiner := func(kind string, n int) {
		t.Helper()
		execSQL(t, conn, `INSERT INTO joiner (aggregate_type, aggregate_id, event_type, payload)
			SELECT 'joiner', $1 || i, $1, '{}' FROM generate_series(1, $2::int) i`, kind, n)
	}
	// The stream confirms past the joiner's rows: a later event of the listed table
	// is delivered and the horizon covers it.
	streamPast := func(rn *running, delivered int) int {
		t.Helper()
		delivered += len(testenv.WriteTx(t, conn, []string{"listed"}, "listed", 5, false))
		if !consumer.WaitDistinct(30*time.Second, delivered) {
			t.Fatalf("%d of %d events delivered", consumer.Distinct(), delivered)
		}
		waitFor(t, 30*time.Second, "the horizon to cover the listed table", func() bool {
			return count(t, conn, "SELECT count(*) FROM outbox_events_pending") == 0
		})
		return delivered
	}

	insertJoiner("before.slot", 10)
	rn := start(t, dbURL, broker, "joining", withTables(first))
	if !rn.waitLog(30*time.Second, "streaming") {
		t.Fatal("the relay did not stream")
	}
	insertJoiner("while.unlisted", 10)
	delivered := streamPast(rn, 0)
	rn.stop()

	rn = start(t, dbURL, broker, "joining", withTables(both))
	delivered += 20
	if !consumer.WaitDistinct(30*time.Second, delivered) {
		t.Fatalf("after the table joined: %d of %d events delivered (its 20 rows: %d)", consumer.Distinct(), delivered,
			count(t, conn, "SELECT count(*) FROM joiner")-count(t, conn, "SELECT count(*) FROM joiner_pending"))
	}
	insertJoiner("after.join", 5)
	delivered += 5
	delivered = streamPast(rn, delivered)
	waitFor(t, 30*time.Second, "the joiner's pending view to empty", func() bool {
		return count(t, conn, "SELECT count(*) FROM joiner_pending") == 0
	})
	rn.stop()

	// Out of the list: the stream skips its inserts again; back in: they come.
	rn = start(t, dbURL, broker, "joining", withTables(first))
	if !rn.waitLog(30*time.Second, "streaming") {
		t.Fatal("the relay did not stream")
	}
	insertJoiner("while.left.out", 7)
	delivered = streamPast(rn, delivered)
	rn.stop()
	if got := count(t, conn, "SELECT count(*) FROM joiner_pending"); got != 7 {
		t.Errorf("%d joiner rows pending while it is out of the list, want the 7 written since", got)
	}
	start(t, dbURL, broker, "joining", withTables(both))
	if !consumer.WaitDistinct(30*time.Second, delivered+7) {
		t.Fatalf("after the table came back: %d of %d events delivered", consumer.Distinct(), delivered+7)
	}
}
