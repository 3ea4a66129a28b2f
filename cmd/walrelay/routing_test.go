package main_test

import (
	"slices"
	"testing"

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
	topics := make([]string, len(rows))
	for i, r := range rows {
		topics[i] = r.topic
	}
	e := startDebeziumE2E(t, debeziumSetup{
		table: `CREATE TABLE outbox (id uuid NOT NULL PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
			aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)`,
		connector: connector, topics: topics, partitions: 1,
	})
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = e.insert(`INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
			VALUES (gen_random_uuid(), 'order', 'ord-1', $1, '{"n": 1}') RETURNING id::text`, r.typ)
	}
	for _, r := range e.records(`.*`, ids) {
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
