// Package debezium imports a Debezium PostgreSQL outbox connector's configuration:
// Kafka Connect's JSON, a Debezium Server .properties file or a Strimzi
// KafkaConnector, with the converters of the worker or platform that runs it,
// becomes the walrelay configuration file whose records are Debezium's, byte for
// byte (Import). Each concern of the outbox event router has a file: the connection
// and slot (connection.go), the converters and payload expansion (converters.go),
// the platforms' default converters (worker.go, and Debezium Server's formats in
// properties.go), ByteBufferConverter and BinaryDataConverter (binaryconverter.go),
// Confluent's Schema Registry converters and their registry options (registry.go),
// Apicurio's converters in the Confluent format (apicurio.go),
// routing (routing.go), the columns (columns.go), additional placement
// (placement.go), tracing (tracing.go), and the tables table.include.list names,
// regular expressions resolved against a database's catalog (tables.go, ReadCatalog).
//
// An option that changes the records where walrelay cannot reproduce it is a
// difference, returned and written as a comment; an option that changes no record
// and has no equivalent is a comment. Passwords, the registry's user:password
// and tokens are not copied: comments name the WALRELAY_* variable they go in.
// The package reads and writes text only; ReadCatalog is its one connection,
// read-only.
package debezium
