// Package schemaregistry is the client of a Confluent-compatible schema registry
// that the registry converters (package record: Avro, Protobuf, JSON Schema) get
// their schema ids from: it registers a schema, or looks it up, and says whether
// the registry refused it (a dead letter) or did not answer (the relay holds the
// stream, docs/design.md "Schema registry"). It holds no cache: record.Schemas
// does, so that no event costs a registry call once its shape was seen.
package schemaregistry
