package main_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/walrelay/walrelay/internal/testenv"
)

// TestDebeziumByteBufferBytes runs import-debezium with --database-url on a
// connector whose value converter is Debezium's ByteBufferConverter over a bytea
// payload (an application's own serialization, Avro for example), then the relay
// on its YAML (PostgreSQL -> walrelay -> Kafka protocol), from the stream and
// again from poll mode. ByteBufferConverter writes a BYTES value as its bytes and
// a NULL as a null value (debezium-core io/debezium/converters/
// ByteBufferConverter.fromConnectData); Debezium's PostgreSQL connector reads a
// bytea as BYTES (binary.handling.mode bytes, its default). Every record's value
// must be the column's bytes exactly.
func TestDebeziumByteBufferBytes(t *testing.T) {
	t.Parallel()
	const connector = `{"name": "outbox-connector", "config": {
		"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
		"plugin.name": "pgoutput", "table.include.list": "public.outbox",
		"key.converter": "org.apache.kafka.connect.storage.StringConverter",
		"value.converter": "io.debezium.converters.ByteBufferConverter",
		"transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"}}`
	e := startDebeziumE2E(t, debeziumSetup{
		table: `CREATE TABLE outbox (id uuid NOT NULL PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
			aggregateid varchar(255) NOT NULL, payload bytea)`,
		connector: connector, catalog: true, topics: []string{"outbox.event.order"}, partitions: 1,
	})
	// An Avro record's bytes (a zig-zag long, then a string) with a 0 and a byte
	// no UTF-8 text has, an empty payload, and a NULL.
	payloads := [][]byte{{0x00, 0x00, 0x00, 0x00, 0x01, 0x0e, 0x06, 'a', 'b', 'c', 0xff}, {}, nil}
	ids := make([]string, len(payloads))
	for i, p := range payloads {
		ids[i] = e.insert(`INSERT INTO outbox (id, aggregatetype, aggregateid, payload)
			VALUES (gen_random_uuid(), 'order', 'ord-1', $1) RETURNING id::text`, p)
	}
	for _, r := range e.records(`outbox\..*`, ids) {
		i := slices.Index(ids, testenv.Header(r, "id"))
		if i < 0 {
			t.Errorf("record of no inserted row: headers %v", r.Headers)
			continue
		}
		want := payloads[i]
		if string(r.Key) != "ord-1" || (want == nil) != (r.Value == nil) || !bytes.Equal(r.Value, want) || len(r.Headers) != 1 {
			t.Errorf("row %d: key %q value %x (nil %t) headers %v, want key ord-1 value %x (nil %t) and the id header alone",
				i, r.Key, r.Value, r.Value == nil, r.Headers, want, want == nil)
		}
	}
}
