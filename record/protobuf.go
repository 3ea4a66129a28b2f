package record

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/walrelay/walrelay/outbox"
)

// Protobuf as Confluent's io.confluent.connect.protobuf.ProtobufConverter writes
// the records the outbox router publishes, with the converter's defaults
// (ProtobufDataConfig: wrapper.for.nullables=false, optional.for.nullables=false,
// scrub.invalid.names=false, enhanced.protobuf.schema.support=false). The rules,
// from ProtobufData.fromConnectSchema and fromConnectData:
//
//   - A primitive at the top (the key, a text, json or bytea payload) is the
//     message of its type in google/protobuf/wrappers.proto: the registered schema
//     is that whole file as protobuf-java holds it, the message
//     google.protobuf.StringValue or BytesValue, its message indexes [7] or [8].
//     Optionality and a schema name (io.debezium.data.Json) are not kept.
//   - A struct (an expanded payload, the envelope) is a proto3 message named after
//     the Connect schema's name: the part after the last dot, the rest the package
//     (an unnamed struct is ConnectDefault1). Each field keeps its name and gets
//     the number of its place (1, 2, …); an optional field is a plain proto3 field,
//     no wrapper, no optional label, no connect.name or version options, so nothing
//     is imported. A struct field is a message nested in its parent, named after the
//     struct's schema name with Message appended when that equals the field's name
//     (always, for the router's names); an array is a repeated field.
//   - Values: a null or a proto3 default (0, false, "", an empty array) is left out;
//     a struct, even an empty one, is written. Fields go in number order, repeated
//     numbers packed, as protobuf-java serializes them.
//
// Where the converter fails a record (an array of arrays or a null element in an
// array, a JSON member name that is no protobuf identifier, names that clash), an
// expanded payload stays the string it was, as it does when the router cannot
// expand it: walrelay writes a record every consumer can read. Members whose
// proto3 JSON names collide (foo_bar beside fooBar) are written as the converter
// writes them, though protoc refuses such a schema. An envelope whose names are
// no identifiers cannot be written at all (protobufInvalid).

// wrappersProto is google/protobuf/wrappers.proto as Confluent's registry prints
// protobuf-java's copy of it (ProtobufSchemaUtils.toString over
// ProtobufSchema.toProtoFile: syntax and package, the file options in that order,
// then the messages).
const wrappersProto = `syntax = "proto3";
package google.protobuf;

option java_package = "com.google.protobuf";
option java_outer_classname = "WrappersProto";
option java_multiple_files = true;
option go_package = "google.golang.org/protobuf/types/known/wrapperspb";
option cc_enable_arenas = true;
option objc_class_prefix = "GPB";
option csharp_namespace = "Google.Protobuf.WellKnownTypes";

message DoubleValue {
  double value = 1;
}
message FloatValue {
  float value = 1;
}
message Int64Value {
  int64 value = 1;
}
message UInt64Value {
  uint64 value = 1;
}
message Int32Value {
  int32 value = 1;
}
message UInt32Value {
  uint32 value = 1;
}
message BoolValue {
  bool value = 1;
}
message StringValue {
  string value = 1;
}
message BytesValue {
  bytes value = 1;
}
`

const (
	stringValueName = "google.protobuf.StringValue"
	bytesValueName  = "google.protobuf.BytesValue"
)

// Message indexes as the serializer writes them (MessageIndexes.toByteArray): the
// count, then each index, as zigzag varints; [0] alone as the single byte 0.
// StringValue and BytesValue are the 8th and 9th messages of wrappers.proto.
var (
	stringValueIndexes = []byte{2, 14}
	bytesValueIndexes  = []byte{2, 16}
)

// protobufSchema is the .proto text ProtobufConverter registers for the key
// (value=false) or value of e, and the message's full name.
func protobufSchema(f *Format, value bool, e *outbox.Event) (text, fullName string) {
	if !value {
		return wrappersProto, stringValueName
	}
	if len(e.Envelope) > 0 {
		return protoText(f.protoEnvelope(e))
	}
	if _, s, ok := f.protoExpanded(e); ok {
		full := structName(f.ExpandJSON.PayloadColumn)
		_, name := splitProtoName(full)
		return protoText(full, protoMessage(name, s))
	}
	if e.PayloadType == "bytea" {
		return wrappersProto, bytesValueName
	}
	return wrappersProto, stringValueName
}

// appendProtobuf appends what follows the magic byte and schema id: the message
// indexes (Confluent's varint-zigzag array; [0] written as the single byte 0) and
// the message bytes.
func appendProtobuf(b []byte, f *Format, value bool, e *outbox.Event) []byte {
	if !value {
		b = append(b, stringValueIndexes...)
		return appendProtoString(b, 1, e.AggregateID)
	}
	if len(e.Envelope) > 0 {
		return f.appendProtoEnvelope(append(b, 0), e)
	}
	if n, s, ok := f.protoExpanded(e); ok {
		return appendProtoStruct(append(b, 0), n, s)
	}
	if e.PayloadType == "bytea" {
		return appendProtoRaw(append(b, bytesValueIndexes...), 1, e.Payload)
	}
	b = append(b, stringValueIndexes...)
	return appendProtoString(b, 1, unsafeString(e.Payload))
}

// protobufInvalid reports why ProtobufConverter cannot write the value of e, nil
// when it can. Only the envelope can fail: a part of its schema name (the topic
// prefix, the table, the aggregate type) or an envelope field's alias that is no
// protobuf identifier. With scrub.invalid.names false the converter hands the
// name to protobuf-java as it is, whose descriptor validation refuses it, and the
// record fails; a registry refuses the schema text as well. The key and the
// primitive payloads are wrappers, and an expanded payload the converter could
// not write stays a string, so they never fail.
func protobufInvalid(f *Format, value bool, e *outbox.Event) error {
	if !value || len(e.Envelope) == 0 {
		return nil
	}
	full := f.protoEnvelopeName(e)
	for rest := full; ; {
		part, tail, more := strings.Cut(rest, ".")
		if !protoIdent(part) {
			return fmt.Errorf("protobuf schema name %q: %q is not a protobuf identifier (ASCII letters, digits and _, not "+
				"starting with a digit), as ProtobufConverter needs it; use a topic-prefix, table and aggregate types "+
				"that are, or another value-converter", full, part)
		}
		if !more {
			break
		}
		rest = tail
	}
	for _, fl := range e.Envelope {
		if !protoIdent(fl.Key) {
			return fmt.Errorf("protobuf schema %q: the envelope field %q is not a protobuf identifier (ASCII letters, "+
				"digits and _, not starting with a digit), as ProtobufConverter needs it; give the column an alias that is",
				full, fl.Key)
		}
	}
	return nil
}

// protoExpanded is e's expanded payload when the converter can write it at the
// top (protoWritable, protoValid); otherwise the payload stays a string.
func (f *Format) protoExpanded(e *outbox.Event) (*node, *schema, bool) {
	n, s, ok := f.protoExpansion(e)
	if !ok {
		return nil, nil, false
	}
	full := structName(f.ExpandJSON.PayloadColumn)
	for rest := full; ; {
		part, tail, more := strings.Cut(rest, ".")
		if !protoIdent(part) {
			return nil, nil, false // splitName keeps the parts as they are
		}
		if !more {
			break
		}
		rest = tail
	}
	_, name := splitProtoName(full)
	if !protoValid(s, name, false) {
		return nil, nil, false
	}
	return n, s, true
}

// protoExpansion is e's expanded payload when fromConnectData can convert its
// values (protoWritable), whatever its name.
func (f *Format) protoExpansion(e *outbox.Event) (*node, *schema, bool) {
	n, s, ok := f.expanded(e)
	if !ok || !protoWritable(n, s) {
		return nil, nil, false
	}
	return n, s, true
}

// protoWritable reports whether fromConnectData can convert n: no array of arrays
// ("Array cannot be nested" in dataTypeFromConnectSchema) and no null in an array
// (a repeated field holds no null; DynamicMessage refuses the list).
func protoWritable(n *node, s *schema) bool {
	switch s.kind {
	case kArray:
		if s.elem.kind == kArray {
			return false
		}
		for _, k := range n.kids {
			if k.kind == kBytes || !protoWritable(k, s.elem) {
				return false
			}
		}
	case kStruct:
		for _, fl := range s.fields {
			if k := n.member(fl.name); k != nil && k.kind != kBytes && !protoWritable(k, fl.s) {
				return false
			}
		}
	}
	return true
}

// protoMsg is a message fromConnectSchema builds for a struct: its fields in
// number order, then its nested messages in the order their fields come
// (messageDefinitionFromConnectSchema).
type protoMsg struct {
	name   string
	fields []protoField
	nested []protoMsg
}

type protoField struct {
	name     string
	typ      string // a scalar's name or a nested message's
	repeated bool
}

// structName is the name fromConnectSchema gives a struct schema: its own, or
// ConnectDefault1 (getNameOrDefault) when it has none.
func structName(name string) string {
	if name == "" {
		return "ConnectDefault1"
	}
	return name
}

// protoText is the file of message m, whose Connect schema is named full, as
// ProtobufSchemaUtils.toString prints it (syntax, package, a blank line, the
// message), and the message's full name: the package is what precedes the last
// dot of full (splitName).
func protoText(full string, m protoMsg) (text, fullName string) {
	pkg, _ := splitProtoName(full)
	var b strings.Builder
	b.WriteString("syntax = \"proto3\";\n")
	if pkg != "" {
		b.WriteString("package " + pkg + ";\n")
	}
	b.WriteString("\n")
	m.write(&b, "")
	if pkg == "" {
		return b.String(), m.name
	}
	return b.String(), pkg + "." + m.name
}

// splitProtoName is ProtobufData.splitName: the package before the last dot.
func splitProtoName(full string) (pkg, name string) {
	if i := strings.LastIndexByte(full, '.'); i >= 0 {
		return full[:i], full[i+1:]
	}
	return "", full
}

// protoMessage is messageDefinitionFromConnectSchema for an inferred struct that
// protoValid accepts. A struct field's schema is named after its path
// (appendSchema), whose last part is the field's name, so
// dataTypeFromConnectSchema appends Message to it.
func protoMessage(name string, s *schema) protoMsg {
	m := protoMsg{name: name}
	for _, fl := range s.fields {
		fs, repeated := fl.s, false
		if fs.kind == kArray {
			fs, repeated = fs.elem, true
		}
		pf := protoField{name: fl.name, typ: protoScalar[fs.kind], repeated: repeated}
		if fs.kind == kStruct {
			pf.typ = fl.name + "Message"
			m.nested = append(m.nested, protoMessage(pf.typ, fs))
		}
		m.fields = append(m.fields, pf)
	}
	return m
}

// protoValid reports whether fromConnectSchema can make a message of struct s
// named base (with Message appended when suffixed), without building it: every
// field name an identifier, no array of arrays ("Array cannot be nested"), no
// field named as a nested message (Message appended to a struct field's name),
// and no struct field whose message would be named as its parent (the converter
// then points the field at the parent, FromConnectContext.contains). Numbers
// 19000 to 19999 are reserved, so a struct has fewer fields.
func protoValid(s *schema, base string, suffixed bool) bool {
	if len(s.fields) >= 19000 {
		return false
	}
	for _, fl := range s.fields {
		if !protoIdent(fl.name) {
			return false
		}
		fs := fl.s
		if fs.kind == kArray {
			fs = fs.elem
		}
		switch fs.kind {
		case kArray:
			return false
		case kStruct:
			if suffixed && fl.name == base || !suffixed && isMessageOf(fl.name, base) {
				return false
			}
			for _, other := range s.fields {
				if isMessageOf(fl.name, other.name) {
					return false
				}
			}
			if !protoValid(fs, fl.name, true) {
				return false
			}
		}
	}
	return true
}

// isMessageOf reports whether name is field + "Message".
func isMessageOf(field, name string) bool {
	return len(name) == len(field)+len("Message") && strings.HasPrefix(name, field) && strings.HasSuffix(name, "Message")
}

var protoScalar = [kStruct + 1]string{kString: "string", kBool: "bool", kInt32: "int32", kInt64: "int64",
	kFloat64: "double", kBytes: "bytes"}

// protoIdent is protobuf-java's Descriptors.validateSymbolName for one part: an
// ASCII letter or _, then letters, digits or _.
func protoIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		return false
	}
	return true
}

// write prints m as ProtobufSchemaUtils.toString does: fields, a blank line, the
// nested messages, each line indented by two spaces per level; a message with
// neither is message X {}.
func (m *protoMsg) write(b *strings.Builder, indent string) {
	b.WriteString(indent + "message " + m.name + " {")
	if len(m.fields) > 0 {
		b.WriteString("\n")
		for i, fl := range m.fields {
			b.WriteString(indent + "  ")
			if fl.repeated {
				b.WriteString("repeated ")
			}
			b.WriteString(fl.typ + " " + fl.name + " = " + strconv.Itoa(i+1) + ";\n")
		}
	}
	if len(m.nested) > 0 {
		// The blank line too is indented: appendIndented indents every line of a
		// nested message's text.
		b.WriteString(indent + "\n")
		for i := range m.nested {
			m.nested[i].write(b, indent+"  ")
		}
	}
	if len(m.fields) == 0 && len(m.nested) == 0 {
		b.WriteString("}\n")
		return
	}
	b.WriteString(indent + "}\n")
}

// protoEnvelope is the router's envelope struct (appendEnvelopeSchema) as a
// message: named topic.prefix.schema.table.<aggregate>.Value, so the package is
// all but Value; the payload first (a string, bytes, or the expanded payload's
// message), then each envelope field as a string.
func (f *Format) protoEnvelope(e *outbox.Event) (full string, m protoMsg) {
	m.name = "Value"
	payload := protoField{name: "payload", typ: "string"}
	if e.PayloadType == "bytea" {
		payload.typ = "bytes"
	}
	if _, s, name, ok := f.protoEnvelopePayload(e); ok {
		payload.typ = name
		m.nested = append(m.nested, protoMessage(name, s))
	}
	m.fields = append(m.fields, payload)
	for _, fl := range e.Envelope {
		m.fields = append(m.fields, protoField{name: fl.Key, typ: "string"})
	}
	return f.protoEnvelopeName(e), m
}

// protoEnvelopeName is the envelope's Connect schema name (appendEnvelopeSchema).
func (f *Format) protoEnvelopeName(e *outbox.Event) string {
	var name strings.Builder
	name.WriteString(f.TopicPrefix)
	if e.Table != "" {
		name.WriteString("." + e.Table)
	}
	name.WriteString("." + e.AggregateType + ".Value")
	return name.String()
}

// protoEnvelopePayload is the expanded payload inside the envelope and the name
// of its message: its struct's schema is named after the payload column, whose
// last part (getUnqualifiedName) names the message, with Message appended when
// that is payload, the field's name. ok is false where the payload stays a
// string: the converter fails the envelope otherwise.
func (f *Format) protoEnvelopePayload(e *outbox.Event) (n *node, s *schema, name string, ok bool) {
	n, s, ok = f.protoExpansion(e)
	if !ok {
		return nil, nil, "", false
	}
	_, name = splitProtoName(structName(f.ExpandJSON.PayloadColumn))
	suffixed := name == "payload"
	if !protoIdent(name) || name == "Value" { // Value would be the envelope itself
		return nil, nil, "", false
	}
	if !protoValid(s, name, suffixed) {
		return nil, nil, "", false
	}
	if suffixed {
		name = "payloadMessage"
	}
	for _, fl := range e.Envelope {
		if fl.Key == name {
			return nil, nil, "", false
		}
	}
	return n, s, name, true
}

// appendProtoEnvelope writes the envelope message: the payload as field 1, each
// envelope field from 2 on; NULLs and empty strings are left out.
func (f *Format) appendProtoEnvelope(b []byte, e *outbox.Event) []byte {
	if n, s, _, ok := f.protoEnvelopePayload(e); ok {
		b = appendProtoTag(b, 1, 2)
		start := len(b)
		b = appendProtoLength(appendProtoStruct(b, n, s), start)
	} else if e.PayloadType == "bytea" {
		b = appendProtoRaw(b, 1, e.Payload)
	} else if !e.NullPayload {
		b = appendProtoString(b, 1, unsafeString(e.Payload))
	}
	for i, fl := range e.Envelope {
		if !fl.Null {
			b = appendProtoString(b, i+2, fl.Value)
		}
	}
	return b
}

// appendProtoStruct writes the fields of struct n of schema s, each under the
// number of its place; a field n lacks, or holds null, is left out.
func appendProtoStruct(b []byte, n *node, s *schema) []byte {
	for i, fl := range s.fields {
		k := n.member(fl.name)
		if k == nil || k.kind == kBytes {
			continue
		}
		num := i + 1
		switch fl.s.kind {
		case kString:
			b = appendProtoString(b, num, k.text)
		case kBool:
			if k.b {
				b = append(appendProtoTag(b, num, 0), 1)
			}
		case kInt32, kInt64:
			if v, _ := strconv.ParseInt(k.text, 10, 64); v != 0 {
				b = appendProtoVarint(appendProtoTag(b, num, 0), uint64(v))
			}
		case kFloat64:
			if bits := math.Float64bits(k.f); bits != 0 { // -0.0 is written
				b = appendProtoFixed64(appendProtoTag(b, num, 1), bits)
			}
		case kStruct:
			b = appendProtoTag(b, num, 2)
			start := len(b)
			b = appendProtoLength(appendProtoStruct(b, k, fl.s), start)
		case kArray:
			b = appendProtoRepeated(b, num, k, fl.s.elem)
		}
	}
	return b
}

// appendProtoRepeated writes array n of elements of schema s: numbers and
// booleans packed into one field, strings and messages one field each.
func appendProtoRepeated(b []byte, num int, n *node, s *schema) []byte {
	if len(n.kids) == 0 {
		return b
	}
	switch s.kind {
	case kString:
		for _, k := range n.kids {
			b = appendProtoBytes(b, num, k.text)
		}
		return b
	case kStruct:
		for _, k := range n.kids {
			b = appendProtoTag(b, num, 2)
			start := len(b)
			b = appendProtoLength(appendProtoStruct(b, k, s), start)
		}
		return b
	}
	b = appendProtoTag(b, num, 2)
	start := len(b)
	for _, k := range n.kids {
		switch s.kind {
		case kBool:
			if k.b {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		case kInt32, kInt64:
			v, _ := strconv.ParseInt(k.text, 10, 64)
			b = appendProtoVarint(b, uint64(v))
		case kFloat64:
			b = appendProtoFixed64(b, math.Float64bits(k.f))
		}
	}
	return appendProtoLength(b, start)
}

// appendProtoString writes a string field unless it is empty (proto3's default),
// invalid UTF-8 as U+FFFD per byte as a Java string holds it.
func appendProtoString(b []byte, num int, s string) []byte {
	if s == "" {
		return b
	}
	return appendProtoBytes(b, num, s)
}

// appendProtoRaw writes a bytes field unless it is empty (proto3's default).
func appendProtoRaw(b []byte, num int, p []byte) []byte {
	if len(p) == 0 {
		return b
	}
	b = appendProtoVarint(appendProtoTag(b, num, 2), uint64(len(p)))
	return append(b, p...)
}

// appendProtoBytes writes a string field even when it is empty (an element of a
// repeated field), invalid UTF-8 as U+FFFD per byte.
func appendProtoBytes(b []byte, num int, s string) []byte {
	b = appendProtoTag(b, num, 2)
	if utf8.ValidString(s) {
		b = appendProtoVarint(b, uint64(len(s)))
		return append(b, s...)
	}
	start := len(b)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\uFFFD"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return appendProtoLength(b, start)
}

// appendProtoLength puts the length of b[start:] before it, as a varint.
func appendProtoLength(b []byte, start int) []byte {
	n := len(b) - start
	size := 1
	for v := n >> 7; v > 0; v >>= 7 {
		size++
	}
	b = append(b, make([]byte, size)...)
	copy(b[start+size:], b[start:start+n])
	appendProtoVarint(b[start:start], uint64(n))
	return b
}

func appendProtoTag(b []byte, num int, wire byte) []byte {
	return appendProtoVarint(b, uint64(num)<<3|uint64(wire))
}

func appendProtoVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func appendProtoFixed64(b []byte, v uint64) []byte {
	return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24), byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56))
}
