package relay_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/relay"
)

// Two poison events in one large transaction, far enough apart that a Kafka commit
// falls between them. The session after the second poisoning finds the first one's
// index covered by the committed position; it must leave that row to the poller,
// not mark it processed: it never reached Kafka. Both end as dead letters, and every
// healthy event is seen exactly once.
func TestExactlyOnceHandedOverEventIsNotMarkedProcessed(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	broker := testenv.Kafka(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "4000000"}))
	conn := testenv.Connect(t, dbURL)
	rn := start(t, dbURL, broker, "eo_handover", fastRetries, func(c *config) {
		c.Delivery = relay.ExactlyOnce
		c.MaxInFlightEvents = 200
	})
	if !rn.waitLog(30*time.Second, "msg=streaming") {
		t.Fatal("the relay did not start streaming")
	}
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ctx := context.Background()

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var healthy, poison []outbox.Event
	write := func(n int, payload []byte, into *[]outbox.Event) {
		for i := 0; i < n; i++ {
			ev := outbox.Event{AggregateType: "order", AggregateID: fmt.Sprintf("agg-%d", len(healthy)%10), EventType: "e", Payload: payload}
			if err := outbox.Write(ctx, tx, &ev); err != nil {
				t.Fatal(err)
			}
			*into = append(*into, ev)
		}
	}
	huge := []byte(`{"blob": "` + strings.Repeat("x", 1_500_000) + `"}`)
	write(200, []byte(`{}`), &healthy)
	write(1, huge, &poison)
	write(1000, []byte(`{}`), &healthy)
	write(1, huge, &poison)
	write(200, []byte(`{}`), &healthy)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	if !consumer.WaitDistinct(time.Minute, len(healthy)) {
		t.Fatalf("healthy events: %d of %d", consumer.Distinct(), len(healthy))
	}
	for i, ev := range poison {
		waitFor(t, time.Minute, fmt.Sprintf("poison event %d in outbox_events_dead_letters", i+1), func() bool {
			var n int
			err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox_events_dead_letters WHERE id = $1", ev.ID).Scan(&n)
			return err == nil && n == 1
		})
		if n := consumer.Count(ev.ID); n != 0 {
			t.Errorf("poison event %d in Kafka %d times", i+1, n)
		}
	}
	marker := testenv.WriteTx(t, conn, []string{"m"}, "marker", 1, false)[0]
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(marker.ID) > 0 }) {
		t.Fatal("marker not delivered")
	}
	for _, ev := range healthy {
		if n := consumer.Count(ev.ID); n != 1 {
			t.Fatalf("healthy event %s seen %d times", ev.ID, n)
		}
	}
}

// Two deployments, each with its own database cluster, on one Kafka cluster with
// the default slot name and progress topic. The second cluster's LSNs are far below
// the position the first one committed: its events must all be produced, not taken
// as covered by the other stream's position, and neither relay may fence the other.
func TestExactlyOncePositionFromAnotherClusterIsIgnored(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	broker := testenv.Kafka(t)
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	eo := func(c *config) { c.Delivery = relay.ExactlyOnce }

	// The first deployment: push its WAL far ahead, then commit a position there.
	firstURL := testenv.MigratedDatabase(t)
	first := testenv.Connect(t, firstURL)
	for i := 0; i < 4; i++ {
		testenv.WriteTx(t, first, []string{"pad"}, "pad", 1, true)
		if _, err := first.Exec(ctx, "SELECT pg_switch_wal()"); err != nil {
			t.Fatal(err)
		}
	}
	if rn := start(t, firstURL, broker, "walrelay", eo); !rn.waitLog(30*time.Second, "msg=streaming") {
		t.Fatal("the first relay did not start streaming")
	}
	a := testenv.WriteTx(t, first, aggregates("a", 5), "first", 50, false)
	if !consumer.WaitDistinct(time.Minute, len(a)) {
		t.Fatalf("first deployment: %d of %d delivered", consumer.Distinct(), len(a))
	}
	positionLSN := testenv.CurrentLSN(t, first)

	_, secondURL := ownCluster(t, "", nil)
	second := testenv.Connect(t, secondURL)
	if lsn := testenv.CurrentLSN(t, second); lsn >= positionLSN {
		t.Fatalf("the second cluster is at %s, not below the first one's position %s: the test proves nothing", lsn, positionLSN)
	}
	if rn := start(t, secondURL, broker, "walrelay", eo); !rn.waitLog(30*time.Second, "msg=streaming") {
		t.Fatal("the second relay did not start streaming")
	}
	b := testenv.WriteTx(t, second, aggregates("b", 5), "second", 50, false)
	a = append(a, testenv.WriteTx(t, first, aggregates("a", 5), "first.more", 50, false)...)
	if !consumer.WaitDistinct(time.Minute, len(a)+len(b)) {
		t.Fatalf("%d of %d events delivered", consumer.Distinct(), len(a)+len(b))
	}
	for _, ev := range append(a, b...) {
		if n := consumer.Count(ev.ID); n != 1 {
			t.Fatalf("event %s (%s) seen %d times", ev.ID, ev.EventType, n)
		}
	}
}

// An unmappable row in a large transaction whose dead-letter write fails once: the
// Kafka commits after it must wait for that write, or the next replication session finds the
// row's index covered and skips it, leaving it neither dead-lettered nor published.
func TestExactlyOnceUnmappableRowIsNeverSkipped(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `CREATE SEQUENCE dead_letter_writes;
		CREATE FUNCTION fail_first_dead_letter() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF nextval('dead_letter_writes') = 1 THEN
				RAISE EXCEPTION 'the first dead-letter write fails';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER fail_first_dead_letter BEFORE UPDATE ON outbox_events FOR EACH ROW
			WHEN (NEW.dead_lettered_at IS NOT NULL AND OLD.dead_lettered_at IS NULL)
			EXECUTE FUNCTION fail_first_dead_letter()`); err != nil {
		t.Fatal(err)
	}
	rn := start(t, dbURL, broker, "eo_unmappable", func(c *config) {
		c.Delivery = relay.ExactlyOnce
		c.MaxInFlightEvents = 200
	})
	if !rn.waitLog(30*time.Second, "msg=streaming") {
		t.Fatal("the relay did not start streaming")
	}
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`, kgo.FetchIsolationLevel(kgo.ReadCommitted()))

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var badID string
	if err := tx.QueryRow(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at)
		VALUES ('order', 'bad', 'odd', '{}', 'infinity') RETURNING id::text`).Scan(&badID); err != nil {
		t.Fatal(err)
	}
	const healthy = 1000
	if _, err := tx.Exec(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
		SELECT 'order', 'ok-' || (g % 10), 'fine', '{}' FROM generate_series(1, $1) g`, healthy); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	waitFor(t, time.Minute, "the unmappable row in outbox_events_dead_letters", func() bool {
		var n int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox_events_dead_letters WHERE id = $1", badID).Scan(&n)
		return err == nil && n == 1
	})
	var writes int64
	if err := conn.QueryRow(ctx, "SELECT last_value FROM dead_letter_writes").Scan(&writes); err != nil {
		t.Fatal(err)
	}
	if writes < 2 {
		t.Fatalf("the dead-letter write ran %d times; the test needs its first one to fail", writes)
	}
	if !consumer.WaitDistinct(time.Minute, healthy) {
		t.Fatalf("healthy events: %d of %d", consumer.Distinct(), healthy)
	}
	if consumer.Count(badID) != 0 {
		t.Fatal("the unmappable row was published")
	}
}

// Exactly-once with two tables whose bigint ids overlap: table ta's row 5 poisons
// the Kafka transaction (too large), table tb's row 5, earlier in the same database
// transaction, is healthy. The next replication session must hand over ta's 5 alone: tb's 5 is
// produced once and never handed over, ta's 5 ends as a dead letter without
// reaching Kafka, and the stream goes on past them.
func TestExactlyOncePoisonIsRememberedPerTable(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	broker := testenv.Kafka(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "4000000"}))
	conn := testenv.Connect(t, dbURL)
	ctx := context.Background()
	for _, name := range []string{"ta", "tb"} {
		execSQL(t, conn, `CREATE TABLE `+name+` (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, aggregate_type text NOT NULL,
			aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`)
		execSQL(t, conn, addBookkeeping(name))
	}
	tables := []relay.TableConfig{
		{Table: "ta", Columns: outbox.DefaultColumns(), TopicTemplate: "ta.{aggregate_type}"},
		{Table: "tb", Columns: outbox.DefaultColumns(), TopicTemplate: "tb.{aggregate_type}"},
	}
	rn := start(t, dbURL, broker, "eo_overlap", fastRetries, func(c *config) {
		c.Publication, c.Tables, c.Delivery = "eo_overlap", tables, relay.ExactlyOnce
	})
	if !rn.waitLog(30*time.Second, "msg=streaming") {
		t.Fatal("the relay did not start streaming")
	}
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `t[ab]\..*`, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	delivered := func(topic, id string) int {
		n := 0
		for _, r := range consumer.Records {
			if r.Topic == topic && testenv.Header(r, "id") == id {
				n++
			}
		}
		return n
	}

	huge := `{"blob": "` + strings.Repeat("x", 1_500_000) + `"}`
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []struct{ table, payload string }{
		{"tb", "{}"}, {"tb", "{}"}, {"tb", "{}"}, {"tb", "{}"}, {"tb", "{}"}, // ids 1 to 5
		{"ta", "{}"}, {"ta", "{}"}, {"ta", "{}"}, {"ta", "{}"}, {"ta", huge}, // ids 1 to 5, the last poisoned
	} {
		if _, err := tx.Exec(ctx, `INSERT INTO `+row.table+` (aggregate_type, aggregate_id, event_type, payload)
			VALUES ('order', 'o-1', 'e', $1)`, row.payload); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO tb (aggregate_type, aggregate_id, event_type, payload) VALUES ('order', 'o-1', 'marker', '{}')`); err != nil {
		t.Fatal(err)
	}
	if !consumer.WaitFor(time.Minute, func() bool { return delivered("tb.order", "6") > 0 }) {
		t.Fatal("the event after the poisoned transaction was not delivered: the stream is stuck")
	}
	waitFor(t, time.Minute, "ta's row 5 a dead letter", func() bool {
		var n int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM ta WHERE id = 5 AND dead_lettered_at IS NOT NULL").Scan(&n)
		return err == nil && n == 1
	})
	for id := 1; id <= 5; id++ {
		if n := delivered("tb.order", fmt.Sprint(id)); n != 1 {
			t.Errorf("tb's row %d delivered %d times, want once", id, n)
		}
		if want := map[bool]int{true: 0, false: 1}[id == 5]; delivered("ta.order", fmt.Sprint(id)) != want {
			t.Errorf("ta's row %d delivered %d times, want %d", id, delivered("ta.order", fmt.Sprint(id)), want)
		}
	}
	var attempts int
	var handedOver bool
	if err := conn.QueryRow(ctx, "SELECT attempts, retry_after IS NOT NULL FROM tb WHERE id = 5").Scan(&attempts, &handedOver); err != nil {
		t.Fatal(err)
	}
	if attempts != 0 || handedOver {
		t.Errorf("tb's healthy row 5 was handed over for ta's poisoned row 5 (attempts %d, retry_after set %t)", attempts, handedOver)
	}
}
