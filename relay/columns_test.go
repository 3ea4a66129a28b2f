package relay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/ops"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/relay"
)

// addBookkeeping is what an existing outbox table needs to be relayed: the columns
// walrelay keeps its bookkeeping in (docs/operations.md, "Bringing your own outbox table").
func addBookkeeping(table string) string {
	return `ALTER TABLE ` + table + ` ADD COLUMN attempts int NOT NULL DEFAULT 0,
		ADD COLUMN processed_at timestamptz, ADD COLUMN retry_after timestamptz,
		ADD COLUMN last_error text, ADD COLUMN dead_lettered_at timestamptz`
}

// debeziumTable creates Debezium's outbox table shape under name, with the
// bookkeeping columns added.
func debeziumTable(t *testing.T, conn *pgx.Conn, name string) {
	t.Helper()
	execSQL(t, conn, `CREATE TABLE `+name+` (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
		aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)`)
	execSQL(t, conn, addBookkeeping(name))
}

func execSQL(t testing.TB, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// waitPublished waits until want rows of the table are published (marked, or below
// the published horizon of --on-publish progress) and none is pending but the dead
// letters.
func waitPublished(t *testing.T, conn *pgx.Conn, table string, want int) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, fmt.Sprintf("%d rows of %s published", want, table), func() bool {
		var published, pending int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE NOT `+unpublished(table)+`),
				count(*) FILTER (WHERE `+unpublished(table)+` AND dead_lettered_at IS NULL) FROM `+table).Scan(&published, &pending); err != nil {
			t.Fatal(err)
		}
		return published == want && pending == 0
	})
}

// runErr waits for the relay to stop by itself and returns what Run returned.
func runErr(t *testing.T, rn *running) error {
	t.Helper()
	select {
	case err := <-rn.done:
		close(rn.done)
		return err
	case <-time.After(time.Minute):
		t.Fatal("the relay did not stop")
		return nil
	}
}

var debeziumColumns = outbox.Columns{ID: "id", AggregateType: "aggregatetype", AggregateID: "aggregateid",
	EventType: "type", Payload: "payload"}

// Debezium's outbox table, with its own column names and no created_at, is relayed
// once the bookkeeping columns are added: the application's INSERT is unchanged,
// the key and headers come from the mapped columns, created_at is the commit time,
// and rows are marked.
func TestDebeziumTableShape(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	ctx := context.Background()
	debeziumTable(t, conn, "outbox")

	type written struct {
		ev                  outbox.Event
		notBefore, notAfter time.Time // the commit time lies between
	}
	var all []written
	insert := func(aggID string, n int) {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var began time.Time
		if err := tx.QueryRow(ctx, "SELECT now()").Scan(&began); err != nil {
			t.Fatal(err)
		}
		var evs []outbox.Event
		for i := range n {
			ev := outbox.Event{AggregateType: "order", AggregateID: aggID, EventType: "OrderCreated",
				Payload: []byte(fmt.Sprintf(`{"n": %d}`, i))}
			if err := tx.QueryRow(ctx, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
				VALUES (gen_random_uuid(), $1, $2, $3, $4) RETURNING id::text`,
				ev.AggregateType, ev.AggregateID, ev.EventType, string(ev.Payload)).Scan(&ev.ID); err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
		}
		// The commit comes clearly after the transaction began, so a header holding
		// the transaction's start (or the insert's time) would fail the check.
		if _, err := tx.Exec(ctx, "SELECT pg_sleep(0.2)"); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		var after time.Time
		if err := conn.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&after); err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			all = append(all, written{ev, began.Add(200 * time.Millisecond), after})
		}
	}

	// One transaction before the slot exists goes through the catch-up pass.
	insert("before", 3)
	catchUp := len(all)
	rn := start(t, dbURL, broker, "debezium", func(c *config) {
		c.Table, c.Publication = "outbox", "own"
		c.Columns = debeziumColumns
	})
	if !rn.waitLog(30*time.Second, "msg=streaming") {
		t.Fatal("the relay did not start streaming")
	}
	for i := range 5 {
		insert(fmt.Sprintf("agg-%d", i), 4)
	}
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	if !consumer.WaitDistinct(time.Minute, len(all)) {
		t.Fatalf("%d of %d events delivered", consumer.Distinct(), len(all))
	}
	byID := map[string]*kgo.Record{}
	for _, rec := range consumer.Records {
		byID[testenv.Header(rec, "id")] = rec
	}
	for i, w := range all {
		rec := byID[w.ev.ID]
		if rec == nil {
			t.Fatalf("event %s not delivered", w.ev.ID)
		}
		if c := consumer.Count(w.ev.ID); c != 1 {
			t.Errorf("event %s delivered %d times", w.ev.ID, c)
		}
		if rec.Topic != "outbox.event.order" || string(rec.Key) != w.ev.AggregateID || string(rec.Value) != string(w.ev.Payload) {
			t.Errorf("event %s: topic %q key %q value %q, want outbox.event.order, %q, %q",
				w.ev.ID, rec.Topic, rec.Key, rec.Value, w.ev.AggregateID, w.ev.Payload)
		}
		for key, want := range map[string]string{"event_type": "OrderCreated", "aggregate_type": "order", "aggregate_id": w.ev.AggregateID} {
			if got := testenv.Header(rec, key); got != want {
				t.Errorf("event %s: header %s = %q, want %q", w.ev.ID, key, got, want)
			}
		}
		created, err := time.Parse(time.RFC3339Nano, testenv.Header(rec, "created_at"))
		if err != nil {
			t.Errorf("event %s: header created_at %q: %v", w.ev.ID, testenv.Header(rec, "created_at"), err)
			continue
		}
		// Streamed events carry the commit time; the catch-up pass cannot know it
		// (the table has no such column) and carries the time of the pass.
		if i >= catchUp && (created.Before(w.notBefore) || created.After(w.notAfter)) {
			t.Errorf("event %s: header created_at %s, want the commit time, between %s and %s",
				w.ev.ID, created, w.notBefore, w.notAfter)
		}
	}
	waitPublished(t, conn, "outbox", len(all))

	// walrelay status reads the same table through the mapping.
	statusCfg := relay.DefaultConfig()
	statusCfg.DatabaseURL, statusCfg.Table, statusCfg.Columns = dbURL, "outbox", debeziumColumns
	statusCfg.Slot, statusCfg.Publication = "debezium", "own"
	st, err := ops.ReadStatus(ctx, statusCfg, ops.StatusLimits{})
	if err != nil || st.PendingRows != 0 || st.DeadLetters != 0 || !st.PublicationExists {
		t.Errorf("status: %+v, %v; want no pending rows or dead letters", st, err)
	}
}

// In poll mode the poller alone relays Debezium's table: without a created_at
// column it goes in physical order, publishes each row once and marks it.
func TestDebeziumTableShapePollMode(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	ctx := context.Background()
	debeziumTable(t, conn, "outbox")
	start(t, dbURL, broker, "unused", fastRetries, func(c *config) {
		c.Mode, c.Table, c.Columns = relay.ModePoll, "outbox", debeziumColumns
	})
	var ids []string
	for i := range 30 {
		var id string
		if err := conn.QueryRow(ctx, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
			VALUES (gen_random_uuid(), 'order', $1, 'OrderCreated', '{}') RETURNING id::text`, fmt.Sprintf("agg-%d", i%3)).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	if !consumer.WaitDistinct(time.Minute, len(ids)) {
		t.Fatalf("%d of %d events delivered", consumer.Distinct(), len(ids))
	}
	seq := map[string]int{}
	for i, id := range ids {
		seq[id] = i
	}
	last := map[string]int{}
	for _, rec := range consumer.Records {
		id := testenv.Header(rec, "id")
		if consumer.Count(id) != 1 {
			t.Errorf("event %s delivered %d times", id, consumer.Count(id))
		}
		if prev, ok := last[string(rec.Key)]; ok && seq[id] < prev {
			t.Errorf("aggregate %s: event %d after event %d", rec.Key, seq[id], prev)
		}
		last[string(rec.Key)] = seq[id]
	}
	waitPublished(t, conn, "outbox", len(ids))
}

// Ids of type bigint and text, payloads of type text, bytea and json and created_at
// of type timestamp are streamed byte-exact and marked, and a poison event on such a
// table is handed over to the poller, retried and dead-lettered.
func TestColumnTypes(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		name, ddl string
		ids       []string // "" lets the table choose
		payloads  [][]byte
		insert    string // $1 id, $2 aggregate id, $3 payload; without ids: $1 aggregate id, $2 payload
	}{
		{
			name: "bigint id, text payload, timestamp",
			ddl: `CREATE TABLE ev (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, aggregate_type text NOT NULL,
				aggregate_id text NOT NULL, event_type text NOT NULL, payload text NOT NULL,
				created_at timestamp NOT NULL DEFAULT '2026-01-02 03:04:05.123456')`,
			payloads: [][]byte{[]byte("Obj\x01avro-ish, not JSON"), []byte(`{"a" :  1}`)},
			insert:   `INSERT INTO ev (aggregate_type, aggregate_id, event_type, payload) VALUES ('order', $1, 'placed', $2) RETURNING id::text`,
		},
		{
			name: "text id, bytea payload, timestamptz",
			ddl: `CREATE TABLE ev (id text PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL,
				event_type text NOT NULL, payload bytea NOT NULL, created_at timestamptz NOT NULL DEFAULT '2026-01-02 03:04:05.123456+00')`,
			ids:      []string{`ord,"1" {x}`, `NULL`, `plain-2`},
			payloads: [][]byte{{0x00, 0xff, 0x10, '\\', 'x'}, {0x0a, 0x00, 0x08, 0x96, 0x01}, {}},
			insert:   `INSERT INTO ev (id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'order', $2, 'placed', $3) RETURNING id`,
		},
		{
			name: "varchar id, json payload, timestamp",
			ddl: `CREATE TABLE ev (id varchar(64) PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL,
				event_type text NOT NULL, payload json NOT NULL, created_at timestamp NOT NULL DEFAULT '2026-01-02 03:04:05.123456')`,
			ids:      []string{"a-1", "a-2"},
			payloads: [][]byte{[]byte(`{"kept" :  "as written",  "order": [2, 1]}`), []byte(`[]`)},
			insert:   `INSERT INTO ev (id, aggregate_type, aggregate_id, event_type, payload) VALUES ($1, 'order', $2, 'placed', $3) RETURNING id::text`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbURL := testenv.MigratedDatabase(t)
			broker := testenv.Kafka(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "4000000"}))
			conn := testenv.Connect(t, dbURL)
			ctx := context.Background()
			execSQL(t, conn, tc.ddl)
			execSQL(t, conn, addBookkeeping("ev"))
			rn := start(t, dbURL, broker, fmt.Sprintf("types_%d", i), fastRetries, func(c *config) { c.Table, c.Publication = "ev", "own" })
			if !rn.waitLog(30*time.Second, "msg=streaming") {
				t.Fatal("the relay did not start streaming")
			}
			payloadArg := func(p []byte) any {
				if strings.Contains(tc.ddl, "bytea") {
					return p
				}
				return string(p)
			}
			insert := func(id, aggID string, p []byte) string {
				args := []any{aggID, payloadArg(p)}
				if tc.ids != nil {
					args = append([]any{id}, args...)
				}
				var got string
				if err := conn.QueryRow(ctx, tc.insert, args...).Scan(&got); err != nil {
					t.Fatal(err)
				}
				return got
			}
			want := map[string][]byte{}
			for i, p := range tc.payloads {
				var id string
				if tc.ids != nil {
					id = tc.ids[i]
				}
				want[insert(id, fmt.Sprintf("agg-%d", i), p)] = p
			}
			// A poison event, too large for the producer, in its own transaction.
			poisonID := insert("poison", "poison", []byte(`"`+strings.Repeat("x", 1_500_000)+`"`)) // valid JSON, text and bytea

			consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
			if !consumer.WaitDistinct(time.Minute, len(want)) {
				t.Fatalf("%d of %d events delivered", consumer.Distinct(), len(want))
			}
			for _, rec := range consumer.Records {
				id := testenv.Header(rec, "id")
				p, ok := want[id]
				if !ok {
					t.Fatalf("unexpected event id %q", id)
				}
				if consumer.Count(id) != 1 || !bytes.Equal(rec.Value, p) {
					t.Errorf("event %q: delivered %d times, value %q, want once, %q", id, consumer.Count(id), rec.Value, p)
				}
				if got := testenv.Header(rec, "created_at"); got != "2026-01-02T03:04:05.123456Z" {
					t.Errorf("event %q: header created_at %q, want 2026-01-02T03:04:05.123456Z (a timestamp is UTC)", id, got)
				}
			}
			waitDeadLettered(t, conn, "ev", poisonID, 1) // too large for the producer: no retry
			// One line says so, without a hand-over to retries that will not happen.
			if !rn.waitLog(10*time.Second, `msg="event dead-lettered at once: the broker refuses it whatever the attempt`) ||
				!strings.Contains(rn.logs.String(), "attempts=1 ") || strings.Contains(rn.logs.String(), "handing the event to the poller") {
				t.Errorf("the too-large event's lines contradict themselves or are missing:\n%s", rn.logs.String())
			}
			waitPublished(t, conn, "ev", len(want))
			if consumer.Count(poisonID) != 0 {
				t.Errorf("poison event delivered")
			}
		})
	}
}

// A column of a type walrelay cannot read stops run with a setup error naming the
// column, its type and the supported types, before anything streams.
func TestUnsupportedColumnTypeIsReported(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct{ name, ddl, want string }{
		{"integer payload", `CREATE TABLE ev (id uuid PRIMARY KEY, aggregate_type text, aggregate_id text,
			event_type text, payload integer, created_at timestamptz)`,
			"column payload of table ev has type integer, which walrelay does not support for column-payload; supported: jsonb, json, text (or varchar), bytea"},
		{"numeric id", `CREATE TABLE ev (id numeric PRIMARY KEY, aggregate_type text, aggregate_id text,
			event_type text, payload jsonb, created_at timestamptz)`,
			"column id of table ev has type numeric, which walrelay does not support for column-id; supported: uuid, text (or varchar), bigint (or integer)"},
		{"date created_at", `CREATE TABLE ev (id uuid PRIMARY KEY, aggregate_type text, aggregate_id text,
			event_type text, payload jsonb, created_at date)`,
			"column created_at of table ev has type date, which walrelay does not support for column-created-at; supported: timestamptz, timestamp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbURL := testenv.MigratedDatabase(t)
			conn := testenv.Connect(t, dbURL)
			execSQL(t, conn, tc.ddl)
			execSQL(t, conn, addBookkeeping("ev"))
			slot := fmt.Sprintf("unsupported_%d", i)
			rn := start(t, dbURL, testenv.Kafka(t), slot, func(c *config) { c.Table, c.Publication = "ev", "own" })
			err := runErr(t, rn)
			var setupErr *catalog.SetupError
			if !errors.As(err, &setupErr) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run returned %v, want a setup error containing %q", err, tc.want)
			}
			var slots int
			if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&slots); err != nil || slots != 0 {
				t.Errorf("a slot was created (%d, %v) for a table walrelay cannot read", slots, err)
			}
		})
	}
}

// A table partitioned by created_at, with PRIMARY KEY (id, created_at), is published
// through its root: rows in every partition are published once and marked, a poison
// event is recorded with the primary key as the conflict target, and a publication
// that lists the table without publish_via_partition_root gets the exact fix.
func TestPartitionedOutbox(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	broker := testenv.Kafka(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "4000000"}))
	conn := testenv.Connect(t, dbURL)
	ctx := context.Background()
	execSQL(t, conn, `CREATE TABLE pev (id uuid NOT NULL DEFAULT gen_random_uuid(), aggregate_type text NOT NULL,
		aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb NOT NULL, created_at timestamptz NOT NULL,
		attempts int NOT NULL DEFAULT 0, processed_at timestamptz, retry_after timestamptz, last_error text,
		dead_lettered_at timestamptz, PRIMARY KEY (id, created_at)) PARTITION BY RANGE (created_at)`)
	execSQL(t, conn, `CREATE TABLE pev_2025 PARTITION OF pev FOR VALUES FROM (MINVALUE) TO ('2026-01-01')`)
	execSQL(t, conn, `CREATE TABLE pev_2026 PARTITION OF pev FOR VALUES FROM ('2026-01-01') TO (MAXVALUE)`)
	execSQL(t, conn, `CREATE PUBLICATION own FOR TABLE pev WITH (publish = 'insert')`)

	var ids []string
	insert := func(aggID, created string) string {
		var id string
		if err := conn.QueryRow(ctx, `INSERT INTO pev (aggregate_type, aggregate_id, event_type, payload, created_at)
			VALUES ('order', $1, 'placed', '{"ok": true}', $2) RETURNING id::text`, aggID, created).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	ids = append(ids, insert("a", "2025-06-01 00:00:00+00"), insert("b", "2026-06-01 00:00:00+00"))

	tweak := func(c *config) { c.Table, c.Publication = "pev", "own" }
	err := runErr(t, start(t, dbURL, broker, "parted", fastRetries, tweak))
	const fix = `ALTER PUBLICATION "own" SET (publish_via_partition_root = true)`
	var setupErr *catalog.SetupError
	if !errors.As(err, &setupErr) || !strings.Contains(err.Error(), fix) {
		t.Fatalf("Run returned %v, want a setup error containing %q", err, fix)
	}
	execSQL(t, conn, fix)

	rn := start(t, dbURL, broker, "parted", fastRetries, tweak)
	if !rn.waitLog(30*time.Second, "msg=streaming") {
		t.Fatal("the relay did not start streaming")
	}
	for i := range 5 {
		ids = append(ids, insert(fmt.Sprintf("a-%d", i), "2025-07-01 00:00:00+00"), insert(fmt.Sprintf("b-%d", i), "2026-07-01 00:00:00+00"))
	}
	var poisonID string
	if err := conn.QueryRow(ctx, `INSERT INTO pev (aggregate_type, aggregate_id, event_type, payload, created_at)
		VALUES ('order', 'poison', 'huge', jsonb_build_object('blob', repeat('x', 1500000)), '2025-08-01 00:00:00+00')
		RETURNING id::text`).Scan(&poisonID); err != nil {
		t.Fatal(err)
	}
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	if !consumer.WaitDistinct(time.Minute, len(ids)) {
		t.Fatalf("%d of %d events delivered", consumer.Distinct(), len(ids))
	}
	for _, id := range ids {
		if c := consumer.Count(id); c != 1 {
			t.Errorf("event %s delivered %d times, want once", id, c)
		}
	}
	waitDeadLettered(t, conn, "pev", poisonID, 1) // too large for the producer: no retry
	waitPublished(t, conn, "pev", len(ids))
	var rows int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pev").Scan(&rows); err != nil || rows != len(ids)+1 {
		t.Errorf("pev holds %d rows (%v), want %d: the bookkeeping inserted copies", rows, err, len(ids)+1)
	}
}

// waitDeadLettered waits until the row id of table is a dead letter after attempts.
func waitDeadLettered(t *testing.T, conn *pgx.Conn, table, id string, attempts int) {
	t.Helper()
	testenv.WaitFor(t, time.Minute, fmt.Sprintf("event %s dead-lettered after %d attempts", id, attempts), func() bool {
		var n int
		var dead bool
		if err := conn.QueryRow(context.Background(), "SELECT attempts, dead_lettered_at IS NOT NULL FROM "+table+
			" WHERE id::text = $1", id).Scan(&n, &dead); err != nil {
			t.Fatal(err)
		}
		return dead && n == attempts
	})
}

// Poll mode on a partitioned table: rows of different partitions share physical
// positions, so marking one of them marks no other: every row is delivered, once.
func TestPartitionedOutboxPollMode(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	ctx := context.Background()
	execSQL(t, conn, `CREATE TABLE ppev (id uuid NOT NULL DEFAULT gen_random_uuid(), aggregate_type text NOT NULL,
		aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb NOT NULL, created_at timestamptz NOT NULL,
		attempts int NOT NULL DEFAULT 0, processed_at timestamptz, retry_after timestamptz, last_error text,
		dead_lettered_at timestamptz, PRIMARY KEY (id, created_at)) PARTITION BY RANGE (created_at)`)
	execSQL(t, conn, `CREATE TABLE ppev_2025 PARTITION OF ppev FOR VALUES FROM (MINVALUE) TO ('2026-01-01')`)
	execSQL(t, conn, `CREATE TABLE ppev_2026 PARTITION OF ppev FOR VALUES FROM ('2026-01-01') TO (MAXVALUE)`)
	var ids []string
	for i := range 3 {
		for _, created := range []string{"2025-06-01 00:00:00+00", "2026-06-01 00:00:00+00"} {
			var id string
			if err := conn.QueryRow(ctx, `INSERT INTO ppev (aggregate_type, aggregate_id, event_type, payload, created_at)
				VALUES ('order', $1, 'placed', '{}', $2::timestamptz + make_interval(secs => $3)) RETURNING id::text`,
				fmt.Sprintf("agg-%d", i), created, i).Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
	}
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	start(t, dbURL, broker, "unused", func(c *config) {
		c.Mode, c.Table, c.PollBatchSize, c.PollInterval = relay.ModePoll, "ppev", 1, 100*time.Millisecond
	})
	if !consumer.WaitDistinct(time.Minute, len(ids)) {
		t.Fatalf("%d of %d events delivered", consumer.Distinct(), len(ids))
	}
	for _, id := range ids {
		if c := consumer.Count(id); c != 1 {
			t.Errorf("event %s delivered %d times, want once", id, c)
		}
	}
	waitPublished(t, conn, "ppev", len(ids))
}

// An adopted table's id may be nullable (a unique index allows NULLs). A row with a
// NULL id can never be an event: the catch-up pass, the stream and the poll-only
// poller each make it a dead letter and go on, rather than failing on it (and
// reconnecting to fail again, for ever).
func TestNullIDRowIsDeadLettered(t *testing.T) {
	t.Parallel()
	for _, mode := range []relay.Mode{relay.ModeStream, relay.ModePoll} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			dbURL, broker, conn := outboxWithBroker(t)
			ctx := context.Background()
			execSQL(t, conn, `CREATE TABLE nid (id uuid UNIQUE, aggregate_type text NOT NULL, aggregate_id text NOT NULL,
				event_type text NOT NULL, payload jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`)
			execSQL(t, conn, addBookkeeping("nid"))
			insert := func(id any) {
				t.Helper()
				execSQL(t, conn, `INSERT INTO nid (id, aggregate_type, aggregate_id, event_type, payload)
					VALUES ($1, 'order', 'o-1', 'e', '{}')`, id)
			}
			insert(nil) // before the slot: the catch-up pass's (stream mode)
			rn := start(t, dbURL, broker, "null_id_"+string(mode), fastRetries, func(c *config) {
				c.Mode, c.Table, c.Publication = mode, "nid", "nid"
				c.PollInterval = 100 * time.Millisecond
			})
			if mode == relay.ModeStream && !rn.waitLog(30*time.Second, "msg=streaming") {
				t.Fatal("the relay did not start streaming")
			}
			consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
			insert(nil) // the stream's
			const healthy = "33333333-3333-4333-8333-333333333333"
			insert(healthy)
			if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(healthy) == 1 }) {
				t.Fatal("the row after the rows with a NULL id was not delivered")
			}
			waitFor(t, 30*time.Second, "both rows with a NULL id dead letters", func() bool {
				var n int
				err := conn.QueryRow(ctx, "SELECT count(*) FROM nid WHERE id IS NULL AND dead_lettered_at IS NOT NULL").Scan(&n)
				return err == nil && n == 2
			})
			if strings.Contains(rn.logs.String(), "replication session failed") || strings.Contains(rn.logs.String(), "poll failed") {
				t.Errorf("the relay failed on a row with a NULL id:\n%s", rn.logs.String())
			}
		})
	}
}
