package record

import (
	"strconv"

	"github.com/walrelay/walrelay/outbox"
)

// The JSON Schema converter writes what Confluent's JsonSchemaConverter writes:
// after the wire format's header, the JSON of the Connect value, the same JSON the
// JSON converter writes without its envelope (JsonSchemaData.fromConnectData), and
// the schema JsonSchemaData.fromConnectSchema makes of the Connect schema:
//
//   - an optional schema is {"oneOf":[{"type":"null"},schema]}, and a struct
//     field's schema carries its place as connect.index (on the oneOf where the
//     field is optional);
//   - a name is the title and a version connect.version, so jsonb's payload is
//     {"type":"string","title":"io.debezium.data.Json","connect.version":1};
//   - int32, int64 and float64 are integer or number with connect.type, bytes a
//     string with connect.type bytes (its value base64), a struct an object of
//     properties, an array of items.
//
// The text is byte for byte what Confluent registers: JsonSchema(Schema) parses
// the everit schema's toString into a Jackson tree, which keeps the key order, and
// canonicalString writes it compactly. everit's ToStringVisitor writes a schema's
// own keyword first (type; oneOf after the rest), then title, then the
// unprocessed properties (connect.*), then properties; an object's properties
// come in the order of the java.util.HashMap everit's ObjectSchema.Builder keeps
// them in (javaHashOrder), and an object without any has no properties key.

const (
	jsTextSchema  = `{"oneOf":[{"type":"null"},{"type":"string"}]}`
	jsJSONSchema  = `{"oneOf":[{"type":"null"},{"type":"string","title":"io.debezium.data.Json","connect.version":1}]}`
	jsBytesSchema = `{"oneOf":[{"type":"null"},{"type":"string","connect.type":"bytes"}]}`
	jsKeySchema   = `{"type":"string"}`
)

// jsonSchemaSchema is the JSON Schema of e's key or value, and its title where it
// is an object (what RecordNameStrategy names the subject after).
func jsonSchemaSchema(f *Format, value bool, e *outbox.Event) (text, fullName string) {
	if !value {
		return jsKeySchema, ""
	}
	_, s, expanded := f.expanded(e)
	if len(e.Envelope) == 0 {
		if expanded {
			return string(appendJSSchema(nil, s, f.ExpandJSON.PayloadColumn, true, -1)), ""
		}
		return jsPayloadSchema(e, -1), ""
	}
	name := envelopeName(f, e)
	b := make([]byte, 0, 256)
	b = append(b, `{"type":"object","title":`...)
	b = appendJSONString(b, name)
	b = append(b, `,"properties":{`...)
	names := make([]string, 1+len(e.Envelope))
	names[0] = "payload"
	for i, fl := range e.Envelope {
		names[i+1] = fl.Key
	}
	for n, i := range javaHashOrder(names) {
		if n > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, names[i])
		b = append(b, ':')
		switch {
		case i > 0:
			b = append(b, `{"connect.index":`...)
			b = strconv.AppendInt(b, int64(i), 10)
			b = append(b, `,"oneOf":[{"type":"null"},{"type":"string"}]}`...)
		case expanded:
			b = appendJSSchema(b, s, f.ExpandJSON.PayloadColumn, true, 0)
		default:
			b = append(b, jsPayloadSchema(e, 0)...)
		}
	}
	b = append(b, "}}"...)
	return string(b), name
}

// jsPayloadSchema is the payload column's schema; index is its field's place, -1
// for none.
func jsPayloadSchema(e *outbox.Event, index int) string {
	s := jsTextSchema
	switch e.PayloadType {
	case "json", "jsonb":
		s = jsJSONSchema
	case "bytea":
		s = jsBytesSchema
	}
	if index < 0 {
		return s
	}
	return `{"connect.index":` + strconv.Itoa(index) + "," + s[1:]
}

// appendJSSchema writes an inferred (optional) schema; index as jsPayloadSchema's.
func appendJSSchema(b []byte, s *schema, path string, named bool, index int) []byte {
	b = append(b, '{')
	if index >= 0 {
		b = append(b, `"connect.index":`...)
		b = strconv.AppendInt(b, int64(index), 10)
		b = append(b, ',')
	}
	b = append(b, `"oneOf":[{"type":"null"},`...)
	switch s.kind {
	case kString:
		b = append(b, `{"type":"string"}`...)
	case kBool:
		b = append(b, `{"type":"boolean"}`...)
	case kInt32:
		b = append(b, `{"type":"integer","connect.type":"int32"}`...)
	case kInt64:
		b = append(b, `{"type":"integer","connect.type":"int64"}`...)
	case kFloat64:
		b = append(b, `{"type":"number","connect.type":"float64"}`...)
	case kBytes:
		b = append(b, `{"type":"string","connect.type":"bytes"}`...)
	case kArray:
		b = append(b, `{"type":"array","items":`...)
		if s.elem.kind == kStruct {
			b = appendJSSchema(b, s.elem, path, named, -1)
		} else {
			b = appendJSSchema(b, s.elem, "", false, -1)
		}
		b = append(b, '}')
	default:
		b = append(b, `{"type":"object"`...)
		if named && !blank([]byte(path)) {
			b = append(b, `,"title":`...)
			b = appendJSONString(b, path)
		}
		prefix := ""
		if named && !blank([]byte(path)) {
			prefix = path + "."
		}
		names := make([]string, len(s.fields))
		for i, fl := range s.fields {
			names[i] = fl.name
		}
		for n, i := range javaHashOrder(names) {
			if n == 0 {
				b = append(b, `,"properties":{`...)
			} else {
				b = append(b, ',')
			}
			fl := s.fields[i]
			b = appendJSONString(b, fl.name)
			b = append(b, ':')
			b = appendJSSchema(b, fl.s, prefix+fl.name, true, i)
		}
		if len(s.fields) > 0 {
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// appendJSONSchema appends the JSON of e's key or value: what the JSON converter
// writes without schemas.
func appendJSONSchema(b []byte, f *Format, value bool, e *outbox.Event) []byte {
	plain := *f
	plain.KeyConverter, plain.ValueConverter, plain.KeySchemas, plain.ValueSchemas = JSON, JSON, false, false
	plain.TombstoneOnEmpty = false
	if !value {
		return appendJSONString(b, e.AggregateID)
	}
	v, _ := plain.Value(e)
	return append(b, v...)
}
