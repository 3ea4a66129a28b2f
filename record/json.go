package record

import (
	"encoding/base64"
	"unicode/utf8"

	"github.com/walrelay/walrelay/outbox"
)

// Payload schemas as Kafka's JsonConverter.asJsonSchema writes them (type,
// optional, name, version, in that order) for the schema Debezium's PostgreSQL
// connector gives the payload column: a string for text, io.debezium.data.Json
// version 1 for json and jsonb (PostgresValueConverter, SchemaFactory.
// datatypeJsonSchema), bytes for bytea. A column without NOT NULL is optional.
const (
	textSchema  = `{"type":"string","optional":true}`
	jsonSchema  = `{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1}`
	bytesSchema = `{"type":"bytes","optional":true}`
)

// jsonValue is the payload through the JSON converter: a JSON string (base64 for
// bytea), null for NULL, inside the schema envelope when schemas are on.
func (f *Format) jsonValue(e *outbox.Event) []byte {
	schema := textSchema
	switch e.PayloadType {
	case "json", "jsonb":
		schema = jsonSchema
	case "bytea":
		schema = bytesSchema
	}
	n := len(e.Payload) + len(e.Payload)/8 + 8
	if e.PayloadType == "bytea" {
		n = base64.StdEncoding.EncodedLen(len(e.Payload)) + 8
	}
	if f.ValueSchemas {
		n += len(`{"schema":,"payload":}`) + len(schema)
	}
	b := make([]byte, 0, n)
	if f.ValueSchemas {
		b = append(b, `{"schema":`...)
		b = append(b, schema...)
		b = append(b, `,"payload":`...)
	}
	switch {
	case e.NullPayload:
		b = append(b, "null"...)
	case e.PayloadType == "bytea":
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, e.Payload)
		b = append(b, '"')
	default:
		b = appendJSONString(b, unsafeString(e.Payload))
	}
	if f.ValueSchemas {
		b = append(b, '}')
	}
	return b
}

// appendJSONString appends s as a JSON string the way Jackson, which Kafka's
// JsonConverter writes with, escapes it: the quote, the backslash, and the control
// characters below the space (\b \t \n \f \r by name, the others as \u00XX in upper
// case hex); everything else, non-ASCII included, as its UTF-8 bytes. Invalid UTF-8
// becomes U+FFFD, as it would in a Java string.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, s[start:i]...)
				b = append(b, "\uFFFD"...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		if c >= ' ' && c != '"' && c != '\\' {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\f':
			b = append(b, '\\', 'f')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafeStringOf(b)
}
