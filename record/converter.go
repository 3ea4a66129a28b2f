package record

import "fmt"

// Converter is how a key or a value becomes bytes, after Kafka Connect's converters.
type Converter uint8

const (
	// String writes the text as it is: org.apache.kafka.connect.storage.StringConverter.
	// A NULL is a null (a tombstone value).
	String Converter = iota
	// JSON writes JSON as org.apache.kafka.connect.json.JsonConverter does: text as a
	// JSON string, bytes as a base64 string, a NULL as the 4 bytes null; with
	// schemas, inside {"schema":…,"payload":…}.
	JSON
	// ByteArray writes the bytes as they are (ByteArrayConverter, and Debezium's
	// BinaryDataConverter): a bytea payload's bytes, a text's UTF-8.
	ByteArray
	// Avro writes Confluent's AvroConverter bytes: the magic byte 0, the schema's
	// 4-byte big-endian registry id, then the Avro binary of the Connect value, its
	// schema the one AvroData.fromConnectSchema makes (schemaregistry.go).
	Avro
	// Protobuf writes Confluent's ProtobufConverter bytes: magic byte, id, the
	// message indexes, then the message.
	Protobuf
	// JSONSchema writes Confluent's JsonSchemaConverter bytes: magic byte, id, then
	// the JSON the JSON converter writes without its envelope.
	JSONSchema
)

// Registered reports whether c writes through a schema registry (Avro, Protobuf,
// JSON Schema): its bytes are framed, so only sinks that carry bytes can take them.
func (c Converter) Registered() bool { return c == Avro || c == Protobuf || c == JSONSchema }

// ParseConverter reads a converter setting: string, json, bytearray, avro,
// protobuf or json-schema.
func ParseConverter(s string) (Converter, error) {
	switch s {
	case "", "string":
		return String, nil
	case "json":
		return JSON, nil
	case "bytearray":
		return ByteArray, nil
	case "avro":
		return Avro, nil
	case "protobuf":
		return Protobuf, nil
	case "json-schema":
		return JSONSchema, nil
	}
	return 0, fmt.Errorf("converter %q is not string, json, bytearray, avro, protobuf or json-schema", s)
}

func (c Converter) String() string {
	switch c {
	case String:
		return "string"
	case JSON:
		return "json"
	case ByteArray:
		return "bytearray"
	case Avro:
		return "avro"
	case Protobuf:
		return "protobuf"
	case JSONSchema:
		return "json-schema"
	}
	return fmt.Sprintf("Converter(%d)", uint8(c))
}
