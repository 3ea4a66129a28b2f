// Package debezium imports a Debezium PostgreSQL outbox connector's configuration:
// Kafka Connect's JSON, a Debezium Server .properties file or a Strimzi
// KafkaConnector, with the worker's converters, becomes the walrelay configuration
// file whose records are Debezium's, byte for byte (Import). Each concern of the
// outbox event router has a file: the connection and slot (connection.go), the
// converters and payload expansion (converters.go), routing (routing.go), the columns
// (columns.go), additional placement (placement.go), tracing (tracing.go), and the
// tables table.include.list names, regular expressions resolved against a database's
// catalog (tables.go, CatalogTables).
//
// An option that changes the records where walrelay cannot reproduce it is a
// difference, returned and written as a comment; an option that changes no record
// and has no equivalent is a comment. Passwords are not copied. The package reads
// and writes text only; CatalogTables is its one connection, read-only.
package debezium
