package debezium

import "fmt"

const (
	postgresConnector = "io.debezium.connector.postgresql.PostgresConnector"
	outboxRouter      = "io.debezium.transforms.outbox.EventRouter"
)

// Import converts one Debezium PostgreSQL outbox connector configuration (Kafka
// Connect's JSON, with or without the name/config envelope; a Debezium Server
// .properties file; or Strimzi YAML with a KafkaConnector) into the walrelay YAML
// configuration file that publishes the same records. name is only for messages;
// worker is the Kafka Connect worker's properties, where the converters usually are
// (nil: none, or the KafkaConnect of a Strimzi file); catalog is the database's tables
// (CatalogTables), which table.include.list regular expressions are resolved against
// (nil: not known, and such an entry is a difference).
//
// diffs are the options whose records walrelay would not reproduce, as
// option=value: reason; each is also a comment in out. err is a file that is not
// such a configuration. Passwords are not copied.
func Import(name string, data []byte, worker map[string]string, catalog []string) (out string, diffs []string, err error) {
	props, strimziWorker, isStrimzi, err := strimziProperties(data)
	if !isStrimzi {
		props, err = debeziumProperties(data)
	}
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", name, err)
	}
	if worker == nil {
		worker = strimziWorker
	}
	if props["connector.class"] != postgresConnector {
		return "", nil, fmt.Errorf("%s is not a Debezium PostgreSQL connector configuration: want connector.class "+
			"(debezium.source.connector.class in Debezium Server, spec.class in a Strimzi KafkaConnector) = %s; give the file the connector was "+
			"created with", name, postgresConnector)
	}
	out, diffs = convert(props, worker, catalog)
	return out, diffs, nil
}
