package relay_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/ops"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/relay"
)

// One relay streams two outbox tables through one slot and one publication: walrelay's
// own outbox_events and a Debezium-shaped tenant_b.outbox, each with its own columns
// and topic template. Rows of both, from before the slot (the catch-up pass) and after,
// some in transactions that write both tables, are delivered once each to their table's
// topic with the key and headers of their table's columns, in order per aggregate and
// table, and marked in their own table; a poison event of the second table is handed
// over, retried and dead-lettered there while the first table has no dead letter.
// Both delivery guarantees.
func TestTwoTablesInOneRelay(t *testing.T) {
	t.Parallel()
	for _, d := range []relay.Delivery{relay.AtLeastOnce, relay.ExactlyOnce} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			twoTables(t, d)
		})
	}
}

func twoTables(t *testing.T, delivery relay.Delivery) {
	slot := "two_tables_" + strings.ReplaceAll(string(delivery), "-", "_")
	dbURL := testenv.MigratedDatabase(t)
	broker := testenv.Kafka(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "4000000"}))
	conn := testenv.Connect(t, dbURL)
	ctx := context.Background()
	execSQL(t, conn, `CREATE SCHEMA tenant_b`)
	debeziumTable(t, conn, "tenant_b.outbox")

	type sent struct {
		ev    outbox.Event
		topic string
		seq   int // insertion order within its table
	}
	var inA, inB []sent
	insertA := func(tx pgx.Tx, aggID string) {
		ev := outbox.Event{AggregateType: "order", AggregateID: aggID, EventType: "order.placed",
			Payload: []byte(fmt.Sprintf(`{"a": %d}`, len(inA)))}
		if err := tx.QueryRow(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
			VALUES ($1, $2, $3, $4) RETURNING id::text`, ev.AggregateType, ev.AggregateID, ev.EventType, string(ev.Payload)).
			Scan(&ev.ID); err != nil {
			t.Fatal(err)
		}
		inA = append(inA, sent{ev: ev, topic: "tenant_a.order", seq: len(inA)})
	}
	insertB := func(tx pgx.Tx, aggID, payload string) string {
		ev := outbox.Event{AggregateType: "invoice", AggregateID: aggID, EventType: "InvoiceSent", Payload: []byte(payload)}
		if err := tx.QueryRow(ctx, `INSERT INTO tenant_b.outbox (id, aggregatetype, aggregateid, type, payload)
			VALUES (gen_random_uuid(), $1, $2, $3, $4) RETURNING id::text`, ev.AggregateType, ev.AggregateID, ev.EventType, payload).
			Scan(&ev.ID); err != nil {
			t.Fatal(err)
		}
		inB = append(inB, sent{ev: ev, topic: "tenant_b.invoice.InvoiceSent", seq: len(inB)})
		return ev.ID
	}
	inTx := func(f func(tx pgx.Tx)) {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		f(tx)
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Before the slot exists: the catch-up pass reads both tables through its snapshot.
	inTx(func(tx pgx.Tx) {
		insertA(tx, "shared")
		insertB(tx, "shared", `{"b": 0}`)
		insertA(tx, "a-0")
	})
	tables := []relay.TableConfig{
		{Table: "outbox_events", Columns: outbox.DefaultColumns(), TopicTemplate: "tenant_a.{aggregate_type}"},
		{Table: "tenant_b.outbox", Columns: debeziumColumns, TopicTemplate: "tenant_b.{aggregate_type}.{event_type}"},
	}
	reg := prometheus.NewRegistry()
	rn := start(t, dbURL, broker, slot, fastRetries, func(c *config) {
		c.Publication, c.Tables, c.Delivery = "two_tables", tables, delivery
		c.Registry, c.StatsInterval = reg, 100*time.Millisecond
	})
	if !rn.waitLog(30*time.Second, "msg=streaming") {
		t.Fatal("the relay did not start streaming")
	}
	// Transactions that write both tables, the same aggregate id in each, and some
	// that write one.
	for i := range 6 {
		inTx(func(tx pgx.Tx) {
			for j := range 3 {
				insertA(tx, "shared")
				insertB(tx, "shared", fmt.Sprintf(`{"b": %d}`, len(inB)))
				insertA(tx, fmt.Sprintf("a-%d", (i+j)%3))
				insertB(tx, fmt.Sprintf("b-%d", (i+j)%3), "{}")
			}
		})
	}
	inTx(func(tx pgx.Tx) { insertA(tx, "a-1") })
	// A poison event of the second table, too large for the producer.
	var poisonID string
	inTx(func(tx pgx.Tx) {
		poisonID = insertB(tx, "poison", `"`+strings.Repeat("x", 1_500_000)+`"`)
		inB = inB[:len(inB)-1] // never delivered
		insertB(tx, "b-after-poison", "{}")
	})

	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `tenant_[ab]\..*`, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	want := len(inA) + len(inB)
	if !consumer.WaitDistinct(time.Minute, want) {
		t.Fatalf("%d of %d events delivered", consumer.Distinct(), want)
	}
	byID := map[string]sent{}
	for _, s := range append(append([]sent{}, inA...), inB...) {
		byID[s.ev.ID] = s
	}
	last := map[string]int{} // by topic and key: the last seq seen
	for _, rec := range consumer.Records {
		id := testenv.Header(rec, "id")
		s, ok := byID[id]
		if !ok {
			t.Fatalf("unexpected event %q on topic %s", id, rec.Topic)
		}
		if c := consumer.Count(id); c != 1 {
			t.Errorf("event %s delivered %d times, want once", id, c)
		}
		if rec.Topic != s.topic || string(rec.Key) != s.ev.AggregateID || string(rec.Value) != string(s.ev.Payload) ||
			testenv.Header(rec, "event_type") != s.ev.EventType || testenv.Header(rec, "aggregate_type") != s.ev.AggregateType {
			t.Errorf("event %s: topic %s, key %s, value %s, event_type %s, aggregate_type %s; want %s, %s, %s, %s, %s", id,
				rec.Topic, rec.Key, rec.Value, testenv.Header(rec, "event_type"), testenv.Header(rec, "aggregate_type"),
				s.topic, s.ev.AggregateID, s.ev.Payload, s.ev.EventType, s.ev.AggregateType)
		}
		k := rec.Topic + "/" + string(rec.Key)
		if prev, ok := last[k]; ok && s.seq < prev {
			t.Errorf("topic %s, aggregate %s: event %d after event %d", rec.Topic, rec.Key, s.seq, prev)
		}
		last[k] = s.seq
	}
	if consumer.Count(poisonID) != 0 {
		t.Errorf("the poison event was delivered %d times", consumer.Count(poisonID))
	}
	waitPublished(t, conn, "outbox_events", len(inA))
	waitPublished(t, conn, "tenant_b.outbox", len(inB))
	// Too large for the producer, it is a dead letter at the first attempt of the
	// plain producer: the stream's (at-least-once) or the poller's after the Kafka
	// transaction it poisoned (exactly-once). A session that fails before its slot is
	// confirmed past the event (a Kafka transaction aborted on it) reads it once more
	// from the slot, and the stream's hand-over counts that attempt too; a retry with
	// backoff would count up to the policy's ten.
	wantAttempts := map[relay.Delivery]int{relay.AtLeastOnce: 1, relay.ExactlyOnce: 2}[delivery]
	testenv.WaitFor(t, time.Minute, fmt.Sprintf("the poison event dead-lettered in tenant_b.outbox after %d attempts (or one more)", wantAttempts), func() bool {
		var attempts int
		var dead bool
		if err := conn.QueryRow(ctx, "SELECT attempts, dead_lettered_at IS NOT NULL FROM tenant_b.outbox WHERE id::text = $1", poisonID).
			Scan(&attempts, &dead); err != nil {
			t.Fatal(err)
		}
		return dead && (attempts == wantAttempts || attempts == wantAttempts+1)
	})
	var deadA, slots, published int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM outbox_events WHERE dead_lettered_at IS NOT NULL),
			(SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1),
			(SELECT count(*) FROM pg_publication_tables WHERE pubname = 'two_tables')`, slot).Scan(&deadA, &slots, &published); err != nil {
		t.Fatal(err)
	}
	if deadA != 0 || slots != 1 || published != 2 {
		t.Errorf("%d dead letters in outbox_events, %d slots, %d tables in the publication; want 0, 1, 2", deadA, slots, published)
	}
	if consumer.Distinct() != want {
		t.Errorf("%d distinct events delivered, want %d", consumer.Distinct(), want)
	}

	// The dead letter is counted for its table, and in the total.
	deadLetters := func() map[string]float64 {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				switch f.GetName() {
				case "walrelay_dead_letters":
					out["total"] = m.GetGauge().GetValue()
				case "walrelay_table_dead_letters":
					for _, l := range m.GetLabel() {
						if l.GetName() == "table" {
							out[l.GetValue()] = m.GetGauge().GetValue()
						}
					}
				}
			}
		}
		return out
	}
	testenv.WaitFor(t, 30*time.Second, "dead letter metrics: 1 in tenant_b.outbox, 0 in public.outbox_events, 1 in all", func() bool {
		d := deadLetters()
		v, ok := d["public.outbox_events"]
		return ok && v == 0 && d["tenant_b.outbox"] == 1 && d["total"] == 1
	})
	// walrelay status has a row per table.
	statusCfg := relay.DefaultConfig()
	statusCfg.DatabaseURL, statusCfg.Tables = dbURL, tables
	statusCfg.Slot, statusCfg.Publication = slot, "two_tables"
	st, err := ops.ReadStatus(ctx, statusCfg, ops.StatusLimits{MaxDeadLetters: 5})
	if err != nil {
		t.Fatal(err)
	}
	wantTables := []ops.TableStatus{{Table: "public.outbox_events"}, {Table: "tenant_b.outbox", PendingRows: 0, DeadLetters: 1}}
	if len(st.Tables) != 2 || st.Tables[0].Table != wantTables[0].Table || st.Tables[0].PendingRows != 0 || st.Tables[0].DeadLetters != 0 ||
		st.Tables[1].Table != wantTables[1].Table || st.Tables[1].PendingRows != 0 || st.Tables[1].DeadLetters != 1 || st.DeadLetters != 1 {
		t.Errorf("status tables %+v (dead letters %d), want %+v and 1 dead letter in all", st.Tables, st.DeadLetters, wantTables)
	}
}

// In poll mode each table has its own poller: the rows of both tables are published
// once each to their table's topic and marked in their table.
func TestTwoTablesPollMode(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	ctx := context.Background()
	execSQL(t, conn, `CREATE SCHEMA tenant_b`)
	debeziumTable(t, conn, "tenant_b.outbox")
	start(t, dbURL, broker, "unused", fastRetries, func(c *config) {
		c.Mode = relay.ModePoll
		c.Tables = []relay.TableConfig{
			{Table: "outbox_events", Columns: outbox.DefaultColumns(), TopicTemplate: "poll_a.{aggregate_type}"},
			{Table: "tenant_b.outbox", Columns: debeziumColumns, TopicTemplate: "poll_b.{aggregate_type}"},
		}
	})
	topicOf := map[string]string{}
	for i := range 10 {
		var a, b string
		if err := conn.QueryRow(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
			VALUES ('order', $1, 'placed', '{}') RETURNING id::text`, fmt.Sprintf("agg-%d", i%3)).Scan(&a); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, `INSERT INTO tenant_b.outbox (id, aggregatetype, aggregateid, type, payload)
			VALUES (gen_random_uuid(), 'invoice', $1, 'sent', '{}') RETURNING id::text`, fmt.Sprintf("agg-%d", i%3)).Scan(&b); err != nil {
			t.Fatal(err)
		}
		topicOf[a], topicOf[b] = "poll_a.order", "poll_b.invoice"
	}
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `poll_[ab]\..*`)
	if !consumer.WaitDistinct(time.Minute, len(topicOf)) {
		t.Fatalf("%d of %d events delivered", consumer.Distinct(), len(topicOf))
	}
	for _, rec := range consumer.Records {
		id := testenv.Header(rec, "id")
		if want, ok := topicOf[id]; !ok || rec.Topic != want || consumer.Count(id) != 1 {
			t.Errorf("event %s on topic %s, delivered %d times; want once, on %q", id, rec.Topic, consumer.Count(id), want)
		}
	}
	waitPublished(t, conn, "outbox_events", 10)
	waitPublished(t, conn, "tenant_b.outbox", 10)
}
