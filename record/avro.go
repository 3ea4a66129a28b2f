package record

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/walrelay/walrelay/outbox"
)

// The Avro converter writes what Confluent's AvroConverter writes for the Connect
// schemas and values the outbox router gives (AvroData.fromConnectSchema and
// fromConnectData, with the converter's defaults: connect.meta.data on, names not
// scrubbed). Its schema text is Avro's Schema.toString of that schema, the text
// the serializer registers:
//
//   - an optional schema is the union ["null", schema] (maybeMakeOptional), and an
//     optional struct field defaults to null;
//   - a named Connect schema keeps its name as connect.name, and its version as
//     connect.version (added first), so jsonb's io.debezium.data.Json is
//     {"type":"string","connect.version":1,"connect.name":"io.debezium.data.Json"};
//   - a struct is a record named after the Connect name split at its last dot
//     (namespace, name); Avro writes a record's namespace only where it differs
//     from the enclosing one, and "" for none inside one that has one; a struct
//     without a name is io.confluent.connect.avro.ConnectDefault (then
//     ConnectDefault2, ...). Where two such structs are equal, AvroData reuses the
//     first and Avro writes its name the second time; walrelay writes the second in
//     full as ConnectDefault2, a different schema text (only an expanded payload
//     with equal objects inside arrays of arrays has them).
//
// The key is the aggregate id, a required string: "string".

// Payload schemas for the payload column as Debezium's connector gives it
// (record/json.go), made optional.
const (
	avroTextSchema  = `["null","string"]`
	avroJSONSchema  = `["null",{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Json"}]`
	avroBytesSchema = `["null","bytes"]`
	avroKeySchema   = `"string"`
)

// avroSchema is the Avro schema of e's key or value and its record's full name.
func avroSchema(f *Format, value bool, e *outbox.Event) (text, fullName string) {
	if !value {
		return avroKeySchema, ""
	}
	_, s, expanded := f.expanded(e)
	return avroValueSchema(f, e, s, expanded)
}

// avroValueSchema is avroSchema of a value whose payload expanded to s (expanded).
func avroValueSchema(f *Format, e *outbox.Event, s *schema, expanded bool) (text, fullName string) {
	if len(e.Envelope) == 0 {
		if expanded {
			w := avroSchemaWriter{}
			return string(w.optional(nil, s, f.ExpandJSON.PayloadColumn, true)), ""
		}
		return avroPayloadSchema(e), ""
	}
	name := envelopeName(f, e)
	ns, short := splitAvroName(name)
	b := make([]byte, 0, 256)
	b = append(b, `{"type":"record","name":`...)
	b = appendJSONString(b, short)
	if ns != "" {
		b = append(b, `,"namespace":`...)
		b = appendJSONString(b, ns)
	}
	b = append(b, `,"fields":[{"name":"payload","type":`...)
	if expanded {
		w := avroSchemaWriter{space: ns}
		b = w.optional(b, s, f.ExpandJSON.PayloadColumn, true)
	} else {
		b = append(b, avroPayloadSchema(e)...)
	}
	b = append(b, `,"default":null}`...)
	for _, fl := range e.Envelope {
		b = append(b, `,{"name":`...)
		b = appendJSONString(b, fl.Key)
		b = append(b, `,"type":["null","string"],"default":null}`...)
	}
	b = append(b, `],"connect.name":`...)
	b = appendJSONString(b, name)
	return string(append(b, '}')), name
}

func avroPayloadSchema(e *outbox.Event) string {
	switch e.PayloadType {
	case "json", "jsonb":
		return avroJSONSchema
	case "bytea":
		return avroBytesSchema
	}
	return avroTextSchema
}

// envelopeName is the router's envelope struct name (appendEnvelopeSchema):
// topic.prefix.schema.table.<aggregate type>.Value.
func envelopeName(f *Format, e *outbox.Event) string {
	var b strings.Builder
	b.WriteString(f.TopicPrefix)
	if e.Table != "" {
		b.WriteByte('.')
		b.WriteString(e.Table)
	}
	b.WriteByte('.')
	b.WriteString(e.AggregateType)
	b.WriteString(".Value")
	return b.String()
}

// splitAvroName is AvroData.splitName: the namespace before the last dot, the
// name after it.
func splitAvroName(full string) (ns, name string) {
	if i := strings.LastIndexByte(full, '.'); i >= 0 {
		return full[:i], full[i+1:]
	}
	return "", full
}

// framedAvroValue is framed for an Avro value, expanding the payload once for
// both the schema (whose id is looked up) and the bytes.
func (f *Format) framedAvroValue(b []byte, e *outbox.Event) []byte {
	n, s, expanded, text, name := f.avroValueSchemaOnce(e)
	b = f.appendHeader(b, true, e, text, name)
	return appendAvroValue(b, e, n, s, expanded)
}

// avroSchemaWriter writes an expanded payload's inferred schema (record/
// expandschema.go names its structs) as Avro's Schema.toString does.
type avroSchemaWriter struct {
	space   string // the enclosing record's namespace
	unnamed int    // ConnectDefault structs written so far
}

// optional writes s, which every inferred schema is, as a union with null.
func (w *avroSchemaWriter) optional(b []byte, s *schema, path string, named bool) []byte {
	b = append(b, `["null",`...)
	b = w.base(b, s, path, named)
	return append(b, ']')
}

func (w *avroSchemaWriter) base(b []byte, s *schema, path string, named bool) []byte {
	switch s.kind {
	case kString:
		return append(b, `"string"`...)
	case kBool:
		return append(b, `"boolean"`...)
	case kInt32:
		return append(b, `"int"`...)
	case kInt64:
		return append(b, `"long"`...)
	case kFloat64:
		return append(b, `"double"`...)
	case kBytes:
		return append(b, `"bytes"`...)
	case kArray:
		b = append(b, `{"type":"array","items":`...)
		if s.elem.kind == kStruct {
			b = w.optional(b, s.elem, path, named)
		} else {
			b = w.optional(b, s.elem, "", false)
		}
		return append(b, '}')
	}
	full := path
	if !named || blank([]byte(path)) {
		// AvroData.getNameOrDefault: a struct without a name.
		w.unnamed++
		full = "io.confluent.connect.avro.ConnectDefault"
		if w.unnamed > 1 {
			full += strconv.Itoa(w.unnamed)
		}
		named = false
	}
	ns, short := splitAvroName(full)
	b = append(b, `{"type":"record","name":`...)
	b = appendJSONString(b, short)
	switch {
	case ns != "" && ns != w.space:
		b = append(b, `,"namespace":`...)
		b = appendJSONString(b, ns)
	case ns == "" && w.space != "":
		b = append(b, `,"namespace":""`...)
	}
	saved := w.space
	w.space = ns
	b = append(b, `,"fields":[`...)
	prefix := ""
	if named {
		prefix = path + "."
	}
	for i, fl := range s.fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendJSONString(b, fl.name)
		b = append(b, `,"type":`...)
		b = w.optional(b, fl.s, prefix+fl.name, true)
		b = append(b, `,"default":null}`...)
	}
	b = append(b, ']')
	w.space = saved
	if named {
		b = append(b, `,"connect.name":`...)
		b = appendJSONString(b, path)
	}
	return append(b, '}')
}

// checkAvro refuses names Avro refuses (Schema.validateName: a letter or _, then
// letters, digits or _), which the Avro converter would fail the record on: the
// envelope struct's name parts and field aliases, and an expanded payload's field
// names and the struct names made of them.
func checkAvro(f *Format, value bool, e *outbox.Event) error {
	if !value {
		return nil
	}
	_, s, expanded := f.expanded(e)
	return checkAvroValue(f, e, s, expanded)
}

// checkAvroValue is checkAvro of a value whose payload expanded to s (expanded).
func checkAvroValue(f *Format, e *outbox.Event, s *schema, expanded bool) error {
	if len(e.Envelope) > 0 {
		for _, part := range strings.Split(envelopeName(f, e), ".") {
			if !avroName(part) {
				return fmt.Errorf("avro: the envelope schema's name %q has the part %q, which is not a valid Avro name "+
					"(a letter or _, then letters, digits or _)", envelopeName(f, e), part)
			}
		}
		for _, fl := range e.Envelope {
			if !avroName(fl.Key) {
				return fmt.Errorf("avro: envelope field %q is not a valid Avro name (a letter or _, then letters, digits or _)", fl.Key)
			}
		}
	}
	if expanded {
		for _, part := range strings.Split(f.ExpandJSON.PayloadColumn, ".") {
			if !avroName(part) {
				return fmt.Errorf("avro: the payload column %q is not a valid Avro record name", f.ExpandJSON.PayloadColumn)
			}
		}
		return checkAvroFields(s)
	}
	return nil
}

func checkAvroFields(s *schema) error {
	switch s.kind {
	case kArray:
		return checkAvroFields(s.elem)
	case kStruct:
		for _, fl := range s.fields {
			if !avroName(fl.name) {
				return fmt.Errorf("avro: the payload's field %q is not a valid Avro name (a letter or _, then letters, digits or _); "+
					"the event cannot be written with value-converter avro", fl.name)
			}
			if err := checkAvroFields(fl.s); err != nil {
				return err
			}
		}
	}
	return nil
}

func avroName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c == '_':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// appendAvro appends the Avro binary of e's key or value (Avro's specification,
// "Binary Encoding"): a union as its branch index then the value, a string or
// bytes as its length then its bytes, an int or long zig-zag varint encoded, a
// double as 8 little-endian bytes, an array as one block of its items then 0, a
// record as its fields in order.
func appendAvro(b []byte, f *Format, value bool, e *outbox.Event) []byte {
	if !value {
		return appendAvroString(b, e.AggregateID)
	}
	n, s, expanded := f.expanded(e)
	return appendAvroValue(b, e, n, s, expanded)
}

// appendAvroValue is appendAvro of a value whose payload expanded to n of s.
func appendAvroValue(b []byte, e *outbox.Event, n *node, s *schema, expanded bool) []byte {
	switch {
	case expanded:
		b = appendAvroOptional(b, n, s)
	case e.NullPayload:
		b = append(b, 0)
	default: // a string's and bytes' encodings are alike
		b = appendAvroBytes(append(b, 2), e.Payload)
	}
	for _, fl := range e.Envelope {
		if fl.Null {
			b = append(b, 0)
		} else {
			b = appendAvroString(append(b, 2), fl.Value)
		}
	}
	return b
}

// appendAvroOptional writes n, of the optional schema s: branch 0 for null, else
// branch 1 (zig-zag 2) and the value.
func appendAvroOptional(b []byte, n *node, s *schema) []byte {
	if n == nil || n.kind == kBytes { // only null is a kBytes node (expandjson.go)
		return append(b, 0)
	}
	b = append(b, 2)
	switch s.kind {
	case kString:
		return appendAvroString(b, n.text)
	case kBool:
		if n.b {
			return append(b, 1)
		}
		return append(b, 0)
	case kInt32, kInt64:
		i, _ := strconv.ParseInt(n.text, 10, 64) // fits checked it
		return binary.AppendVarint(b, i)
	case kFloat64:
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(n.f))
	case kArray:
		if len(n.kids) > 0 {
			b = binary.AppendVarint(b, int64(len(n.kids)))
			for _, k := range n.kids {
				b = appendAvroOptional(b, k, s.elem)
			}
		}
		return append(b, 0)
	}
	for _, fl := range s.fields {
		b = appendAvroOptional(b, n.member(fl.name), fl.s)
	}
	return b
}

func appendAvroString(b []byte, s string) []byte {
	b = binary.AppendVarint(b, int64(len(s)))
	return append(b, s...)
}

func appendAvroBytes(b []byte, p []byte) []byte {
	b = binary.AppendVarint(b, int64(len(p)))
	return append(b, p...)
}
