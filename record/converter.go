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
)

// ParseConverter reads a converter setting: string, json or bytearray.
func ParseConverter(s string) (Converter, error) {
	switch s {
	case "", "string":
		return String, nil
	case "json":
		return JSON, nil
	case "bytearray":
		return ByteArray, nil
	}
	return 0, fmt.Errorf("converter %q is not string, json or bytearray", s)
}

func (c Converter) String() string {
	switch c {
	case String:
		return "string"
	case JSON:
		return "json"
	case ByteArray:
		return "bytearray"
	}
	return fmt.Sprintf("Converter(%d)", uint8(c))
}
