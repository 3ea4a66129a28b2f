package main_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/testenv"
)

// debeziumSetup is what a Debezium end-to-end test starts from: Debezium's outbox
// table, the connector configuration import-debezium reads, and the topics the
// records go to.
type debeziumSetup struct {
	table      string   // CREATE TABLE outbox ...
	connector  string   // the connector configuration (JSON)
	worker     string   // the Connect worker (--worker); "" StringConverter's, by --key-converter and --value-converter
	catalog    bool     // import with --database-url, whose catalog says the columns' types
	topics     []string // created before the relay starts
	partitions int32    // of each topic
}

// debeziumE2E is a Debezium end-to-end run (PostgreSQL -> walrelay -> Kafka
// protocol): the relay streams on the YAML import-debezium printed, into kfake.
type debeziumE2E struct {
	t       *testing.T
	env     []string
	brokers []string
	conn    *pgx.Conn
	relay   *proc
}

// startDebeziumE2E creates the table in a throwaway database and the topics in
// kfake, imports the connector configuration, migrates, and starts the relay on the
// imported YAML, returning once it streams.
func startDebeziumE2E(t *testing.T, s debeziumSetup) *debeziumE2E {
	t.Helper()
	dbURL := testenv.Database(t)
	kafka := testenv.Kafka(t)
	brokers := kafka.ListenAddrs()
	for _, topic := range s.topics {
		if err := kafka.CreateTopic(topic, s.partitions, nil); err != nil {
			t.Fatal(err)
		}
	}
	execSQL(t, dbURL, s.table)
	args := []string{"import-debezium"}
	if s.worker != "" {
		args = append(args, "--worker", writeFile(t, "worker.properties", s.worker))
	} else {
		// What the connector does not name, StringConverter writes.
		args = append(args, "--key-converter", "string", "--value-converter", "string")
	}
	if s.catalog {
		args = append(args, "--database-url", dbURL)
	}
	imported := run(t, time.Minute, baseEnv(), append(args, writeFile(t, "connector.json", s.connector))...)
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
	return &debeziumE2E{t: t, env: env, brokers: brokers, conn: conn, relay: relay}
}

// insert runs an INSERT ... RETURNING id::text and returns the row's event id.
func (e *debeziumE2E) insert(sql string, args ...any) string {
	e.t.Helper()
	var id string
	if err := e.conn.QueryRow(context.Background(), sql, args...).Scan(&id); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// records waits until the stream published every event of ids, stops the relay,
// then runs poll mode (the stream left the rows unmarked) until it published each
// again, and returns every record consumed from the topics matching topicRegex:
// the stream's and poll mode's, which each test compares with Debezium's alike.
func (e *debeziumE2E) records(topicRegex string, ids []string) []*kgo.Record {
	e.t.Helper()
	consumer := testenv.NewConsumer(e.t, e.brokers, topicRegex)
	if !consumer.WaitDistinct(60*time.Second, len(ids)) {
		e.t.Fatalf("consumed %d distinct events, want %d\n%s", consumer.Distinct(), len(ids), e.relay.output.String())
	}
	e.relay.stop(15 * time.Second)
	streamed := len(consumer.Records)
	poller := startProc(e.t, "poller", append(e.env, "WALRELAY_MODE=poll", "WALRELAY_ON_PUBLISH=mark"), "run")
	if !consumer.WaitFor(60*time.Second, func() bool {
		for _, id := range ids {
			if consumer.Count(id) < 2 {
				return false
			}
		}
		return true
	}) {
		e.t.Fatalf("poll mode published %d records, want the %d events again", len(consumer.Records)-streamed, len(ids))
	}
	poller.stop(15 * time.Second)
	return consumer.Records
}
