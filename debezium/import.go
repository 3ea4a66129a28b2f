package debezium

import "fmt"

const (
	postgresConnector = "io.debezium.connector.postgresql.PostgresConnector"
	outboxRouter      = "io.debezium.transforms.outbox.EventRouter"
)

// Options are what Import knows besides the connector configuration.
type Options struct {
	// Worker is --worker's (ReadWorker); nil: the platform the configuration
	// names, if any (Debezium Server's formats, a Strimzi KafkaConnect in the file).
	Worker *Worker
	// Converters is --key-converter's and --value-converter's (ConverterFlags),
	// over Worker's; nil: none given.
	Converters *Worker
	// Catalog is the database's tables (ReadCatalog), which table.include.list
	// regular expressions are resolved against; nil: not known, and such an entry
	// is a difference.
	Catalog *Catalog
}

// Import converts one Debezium PostgreSQL outbox connector configuration (Kafka
// Connect's JSON, with or without the name/config envelope; a Debezium Server
// .properties file; or Strimzi YAML with a KafkaConnector) into the walrelay YAML
// configuration file that publishes the same records. name is only for messages.
// A converter the connector does not name is the worker's (opts), else its
// platform's default; a connector that names neither converter with nothing
// saying which worker runs it is refused (err), saying how to tell.
//
// diffs are the options whose records walrelay would not reproduce, as
// option=value: reason; each is also a comment in out. err is a file that is not
// such a configuration. Passwords are not copied.
func Import(name string, data []byte, opts Options) (out string, diffs []string, err error) {
	props, platform, isStrimzi, err := strimziProperties(data)
	if !isStrimzi {
		props, platform, err = debeziumProperties(data)
	}
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", name, err)
	}
	if props["connector.class"] != postgresConnector {
		return "", nil, fmt.Errorf("%s is not a Debezium PostgreSQL connector configuration: want connector.class "+
			"(debezium.source.connector.class in Debezium Server, spec.class in a Strimzi KafkaConnector) = %s; give the file the connector was "+
			"created with", name, postgresConnector)
	}
	var workers []*Worker // searched in order, after the connector's own
	if opts.Converters != nil {
		workers = append(workers, opts.Converters)
	}
	if opts.Worker != nil {
		workers = append(workers, opts.Worker)
	} else if platform != nil {
		workers = append(workers, platform)
	}
	if err := namesConverters(name, props, workers); err != nil {
		return "", nil, err
	}
	out, diffs = convert(props, workers, opts.Catalog)
	return out, diffs, nil
}
