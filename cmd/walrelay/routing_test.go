package main_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
)

// TestDebeziumRouting runs import-debezium on a router that routes by the type
// column (route.by.field, also table.field.event.type), keys records by the id
// column (table.field.event.key, also table.field.event.id) and names topics with
// route.topic.regex and route.topic.replacement, then the relay on its YAML
// (PostgreSQL -> walrelay -> Kafka protocol), from the stream and again from poll
// mode. The router hands the routed value to Kafka's RegexRouter
// (debezium-connect-plugins/src/main/java/io/debezium/transforms/outbox/
// EventRouterDelegate.java): a whole match becomes the replacement, any other
// value is its own topic. Before, the table failed at its first row with "no
// column" for the column the two roles share.
func TestDebeziumRouting(t *testing.T) {
	t.Parallel()
	const connector = `{"name": "outbox-connector", "config": {
		"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
		"plugin.name": "pgoutput", "table.include.list": "public.outbox",
		"key.converter": "org.apache.kafka.connect.storage.StringConverter",
		"value.converter": "org.apache.kafka.connect.storage.StringConverter",
		"transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
		"transforms.outbox.route.by.field": "type", "transforms.outbox.table.field.event.type": "type",
		"transforms.outbox.table.field.event.key": "id",
		"transforms.outbox.route.topic.regex": "(?<kind>Order|Customer)(Created|Shipped)",
		"transforms.outbox.route.topic.replacement": "${kind}.$2.events"}}`
	rows := []struct{ typ, topic string }{
		{"OrderCreated", "Order.Created.events"}, {"CustomerShipped", "Customer.Shipped.events"},
		{"OrderCreatedLate", "OrderCreatedLate"}, // no whole match: the value is the topic
	}
	dbURL := testenv.Database(t)
	kafka := testenv.Kafka(t)
	brokers := kafka.ListenAddrs()
	for _, r := range rows {
		if err := kafka.CreateTopic(r.topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	execSQL(t, dbURL, `CREATE TABLE outbox (id uuid NOT NULL PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
		aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)`)
	imported := run(t, time.Minute, baseEnv(), "import-debezium", writeFile(t, "connector.json", connector))
	if imported.code != 0 {
		t.Fatalf("import-debezium: exit code %d\n%s", imported.code, imported.stderr)
	}
	slot := slotName(t, "")
	env := relayEnv(dbURL, brokers, "WALRELAY_CONFIG="+writeFile(t, "walrelay.yaml", imported.stdout),
		"WALRELAY_SLOT="+slot, "WALRELAY_PUBLICATION="+slot)
	if res := run(t, time.Minute, env, "migrate"); res.code != 0 {
		t.Fatalf("migrate: exit code %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	conn := testenv.Connect(t, dbURL)
	relay := startProc(t, "relay", env, "run")
	waitStreaming(t, conn, slot, relay)
	ids := make([]string, len(rows))
	for i, r := range rows {
		if err := conn.QueryRow(context.Background(), `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
			VALUES (gen_random_uuid(), 'order', 'ord-1', $1, '{"n": 1}') RETURNING id::text`, r.typ).Scan(&ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	consumer := testenv.NewConsumer(t, brokers, `.*`)
	if !consumer.WaitDistinct(60*time.Second, len(rows)) {
		t.Fatalf("consumed %d distinct events, want %d\n%s", consumer.Distinct(), len(rows), relay.output.String())
	}
	relay.stop(15 * time.Second)
	poll := startProc(t, "poller", append(env, "WALRELAY_MODE=poll", "WALRELAY_ON_PUBLISH=mark"), "run")
	if !consumer.WaitFor(60*time.Second, func() bool {
		for _, id := range ids {
			if consumer.Count(id) < 2 {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("poll mode did not publish the %d events again", len(rows))
	}
	poll.stop(15 * time.Second)
	for _, r := range consumer.Records {
		i := slices.Index(ids, testenv.Header(r, "id"))
		if i < 0 {
			t.Errorf("record of no inserted row: headers %v", r.Headers)
			continue
		}
		if r.Topic != rows[i].topic || string(r.Key) != ids[i] || string(r.Value) != `{"n": 1}` {
			t.Errorf("type %s: topic %s key %s value %s, want topic %s key %s value {\"n\": 1}",
				rows[i].typ, r.Topic, r.Key, r.Value, rows[i].topic, ids[i])
		}
	}
}
