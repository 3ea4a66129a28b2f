// Package record turns an outbox event into the record a broker carries: its key,
// value, headers and timestamp. It is the one place that decides those bytes, so
// that every sink publishes the same record for the same row, and so that a table
// Debezium's outbox router used to publish keeps its records byte for byte when
// walrelay takes over (docs/debezium.md).
//
// A Format names the converters Kafka Connect would have run (Debezium's
// key.converter and value.converter: String, JSON with or without schemas, or the
// bytes as they are) and the router options that change a record. The zero Format
// is walrelay's own record: the aggregate id as the key, the payload's bytes as the
// value, a NULL payload as a null value; it costs no allocation per event.
package record
