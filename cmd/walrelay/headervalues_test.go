package main_test

import (
	"context"
	"slices"
	"testing"

	"github.com/walrelay/walrelay/internal/testenv"
)

// TestDebeziumHeaderValues runs import-debezium on a router that places typed
// columns as headers (table.fields.additional.placement col:header[:name]), then
// the relay on its YAML (PostgreSQL -> walrelay -> Kafka protocol), from the stream
// and again from poll mode, and compares each header with what Debezium's
// PostgreSQL connector (time.precision.mode adaptive) and Kafka Connect's
// SimpleHeaderConverter write: booleans true/false, a timestamptz as
// io.debezium.time.ZonedTimestamp in UTC (debezium-connector-postgres/src/main/
// java/io/debezium/connector/postgresql/PostgresValueConverter.java), a timestamp
// as MicroTimestamp's microseconds and a date as Date's epoch days
// (debezium-connector-common/src/main/java/io/debezium/jdbc/TemporalPrecisionMode.java),
// a uuid as its text, a numeric(p,s) as Java's BigDecimal.toString (decimal.handling.mode
// precise), and a NULL column as a header with a null value.
func TestDebeziumHeaderValues(t *testing.T) {
	t.Parallel()
	const connector = `{"name": "outbox-connector", "config": {
		"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
		"plugin.name": "pgoutput", "table.include.list": "public.outbox",
		"key.converter": "org.apache.kafka.connect.storage.StringConverter",
		"value.converter": "org.apache.kafka.connect.storage.StringConverter",
		"transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
		"transforms.outbox.table.fields.additional.placement": "urgent:header,at:header:occurredAt,local:header,day:header,ref:header,amount:header,tiny:header,note:header"}}`
	e := startDebeziumE2E(t, debeziumSetup{
		table: `CREATE TABLE outbox (id uuid NOT NULL PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
			aggregateid varchar(255) NOT NULL, payload jsonb, urgent boolean, at timestamptz, local timestamp,
			day date, ref uuid, amount numeric(10,2), tiny numeric(20,10), note text)`,
		connector: connector, topics: []string{"outbox.event.order"}, partitions: 1,
	})
	// The session's time zone is not UTC: the header must be UTC all the same.
	if _, err := e.conn.Exec(context.Background(), "SET TIME ZONE 'Europe/Berlin'"); err != nil {
		t.Fatal(err)
	}
	rows := []struct {
		insert string
		want   []string // key=value, key=<null>
	}{
		{`true, '2024-05-01 14:00:00.123456+02', '2024-05-01 12:00:00.123456', '2024-05-01',
			'6f1c5e2a-3b4d-4e5f-8a9b-0c1d2e3f4a5b', 12.5, 0.00000001, 'n'`,
			[]string{"urgent=true", "occurredAt=2024-05-01T12:00:00.123456Z", "local=1714564800123456", "day=19844",
				"ref=6f1c5e2a-3b4d-4e5f-8a9b-0c1d2e3f4a5b", "amount=12.50", "tiny=1.00E-8", "note=n"}},
		{`false, '2024-05-01 12:00:00+00', NULL, NULL, NULL, NULL, NULL, NULL`,
			[]string{"urgent=false", "occurredAt=2024-05-01T12:00:00.000000Z", "local=<null>", "day=<null>",
				"ref=<null>", "amount=<null>", "tiny=<null>", "note=<null>"}},
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = e.insert(`INSERT INTO outbox (id, aggregatetype, aggregateid, payload,
			urgent, at, local, day, ref, amount, tiny, note) VALUES (gen_random_uuid(), 'order', 'ord-1', '{"n": 1}', ` + r.insert + `)
			RETURNING id::text`)
	}
	for _, r := range e.records(`outbox\..*`, ids) {
		i := slices.Index(ids, testenv.Header(r, "id"))
		if i < 0 {
			t.Errorf("record of no inserted row: headers %v", r.Headers)
			continue
		}
		var got []string
		for _, h := range r.Headers[1:] { // after the router's id header
			v := string(h.Value)
			if h.Value == nil {
				v = "<null>"
			}
			got = append(got, h.Key+"="+v)
		}
		if r.Headers[0].Key != "id" || !slices.Equal(got, rows[i].want) {
			t.Errorf("row %d: headers %q after %s, want %q after id", i, got, r.Headers[0].Key, rows[i].want)
		}
	}
}

// TestDebeziumHeadersNamedLikeWalrelays places columns under the names walrelay's
// own headers have under record-headers walrelay (event_type, aggregate_type,
// aggregate_id, created_at), as a router may (col:header:alias). Debezium's
// router sets the id header alone, so under record-headers debezium, which the
// import writes, those headers are the columns': the relay runs, and each record
// has id, then the placed columns under those names, with Debezium's values.
func TestDebeziumHeadersNamedLikeWalrelays(t *testing.T) {
	t.Parallel()
	const connector = `{"name": "outbox-connector", "config": {
		"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
		"plugin.name": "pgoutput", "table.include.list": "public.outbox",
		"key.converter": "org.apache.kafka.connect.storage.StringConverter",
		"value.converter": "org.apache.kafka.connect.storage.StringConverter",
		"transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
		"transforms.outbox.table.fields.additional.placement": "type:header:event_type,aggregatetype:header:aggregate_type,aggregateid:header:aggregate_id,at:header:created_at"}}`
	e := startDebeziumE2E(t, debeziumSetup{
		table: `CREATE TABLE outbox (id uuid NOT NULL PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
			aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb, at timestamptz)`,
		connector: connector, topics: []string{"outbox.event.order"}, partitions: 1,
	})
	id := e.insert(`INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload, at) VALUES
		(gen_random_uuid(), 'order', 'ord-7', 'OrderShipped', '{"n": 7}', '2024-05-01 12:00:00+00') RETURNING id::text`)
	want := []string{"id=" + id, "event_type=OrderShipped", "aggregate_type=order", "aggregate_id=ord-7",
		"created_at=2024-05-01T12:00:00.000000Z"}
	for _, r := range e.records(`outbox\..*`, []string{id}) {
		var got []string
		for _, h := range r.Headers {
			got = append(got, h.Key+"="+string(h.Value))
		}
		if !slices.Equal(got, want) {
			t.Errorf("headers %q, want %q", got, want)
		}
	}
}
