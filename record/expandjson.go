package record

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// ExpandJSON is the outbox router's table.expand.json.payload: a text or json
// payload that starts with { is parsed, given a schema inferred from the document,
// and written again by the value converter as the struct it became
// (EventRouterDelegate.parseJsonPayload, JsonSchemaData.toConnectSchema and
// toConnectData in debezium-connect-plugins' transforms/outbox). A payload that does
// not parse, or whose values do not fit the inferred schema, stays the string it was.
type ExpandJSON struct {
	// Enabled turns the expansion on.
	Enabled bool
	// KeepNulls is table.json.payload.null.behavior=optional_bytes: a null field
	// stays, as an optional bytes field; otherwise (ignore) it is dropped.
	KeepNulls bool
	// KeepEmptyArrays is table.json.payload.empty.array.behavior=optional_string: an
	// empty array stays, as an array of optional strings; otherwise (ignore) it is
	// dropped.
	KeepEmptyArrays bool
	// PayloadColumn is the payload column's name (the router's
	// table.field.event.payload), which names the inferred struct's schema when the
	// value converter writes schemas.
	PayloadColumn string
}

// kind is a Kafka Connect schema type the expansion infers.
type kind uint8

const (
	kString kind = iota
	kBool
	kInt32
	kInt64
	kFloat64
	kBytes
	kArray
	kStruct
)

// schema is an inferred Connect schema; every one is optional.
type schema struct {
	kind   kind
	elem   *schema // kArray
	fields []field // kStruct, in the order of first appearance
}

type field struct {
	name string
	s    *schema
}

// node is a parsed JSON value with its object members in document order, as
// Jackson's tree keeps them (a repeated name replaces the value in its first place).
type node struct {
	kind  kind // kString, kBool, number kinds, kBytes for null, kArray, kStruct
	text  string
	b     bool
	f     float64
	big   bool // an integer beyond 64 bits: Jackson's BigIntegerNode
	names []string
	kids  []*node
}

var errNotExpandable = errors.New("payload does not expand")

// parseTree reads the first JSON value of p as Jackson's ObjectMapper.readTree does;
// what follows the value is not read (treeScanner, record/expandscan.go).
func parseTree(p []byte) (*node, error) {
	s := treeScanner{p: p}
	return s.value(0)
}

// schemaOf is JsonSchemaData.toConnectSchema: nil where the router drops the field.
func (x ExpandJSON) schemaOf(n *node) (*schema, error) {
	switch n.kind {
	case kBytes:
		if x.KeepNulls {
			return &schema{kind: kBytes}, nil
		}
		return nil, nil
	case kArray:
		if len(n.kids) == 0 {
			if x.KeepEmptyArrays {
				return &schema{kind: kArray, elem: &schema{kind: kString}}, nil
			}
			return nil, nil
		}
		elem, err := x.elemSchema(n)
		if err != nil {
			return nil, err
		}
		return &schema{kind: kArray, elem: elem}, nil
	case kStruct:
		s := &schema{kind: kStruct}
		for i, name := range n.names {
			fs, err := x.schemaOf(n.kids[i])
			if err != nil {
				return nil, err
			}
			if fs != nil {
				s.fields = append(s.fields, field{name, fs})
			}
		}
		return s, nil
	}
	return &schema{kind: n.kind}, nil
}

// elemSchema is JsonSchemaData.toConnectSchemaWithCycles: the elements' one type
// (nulls skipped; a mix is an error, as are ints beside longs), objects with the
// union of their fields (a field's first schema stays, unless it was bytes).
func (x ExpandJSON) elemSchema(n *node) (*schema, error) {
	var ref *node
	for _, k := range n.kids {
		if k.kind == kBytes {
			continue
		}
		if ref == nil {
			ref = k
		}
		if k.kind != ref.kind {
			return nil, errNotExpandable // int beside long or double included
		}
	}
	if ref == nil {
		// Only nulls: the router's sample is the null node.
		s, _ := x.schemaOf(&node{kind: kBytes})
		if s == nil {
			return nil, errNotExpandable
		}
		return s, nil
	}
	if ref.kind != kStruct {
		s, err := x.schemaOf(ref)
		if err == nil && s == nil {
			err = errNotExpandable // the sample is an empty array the router drops
		}
		return s, err
	}
	var union *schema
	for _, k := range n.kids {
		if k.kind != kStruct {
			continue
		}
		s, err := x.schemaOf(k)
		if err != nil {
			return nil, err
		}
		if union == nil {
			union = s
			continue
		}
		for _, f := range s.fields {
			placed := false
			for i, have := range union.fields {
				if have.name == f.name {
					if have.s.kind == kBytes && f.s.kind != kBytes {
						union.fields[i].s = f.s
					}
					placed = true
					break
				}
			}
			if !placed {
				union.fields = append(union.fields, f)
			}
		}
	}
	return union, nil
}

// fits is Connect's value validation of JsonSchemaData.toConnectData's result: each
// value must be of its field's type (an int in an int64 field is not), else the
// router keeps the payload as it was.
func fits(n *node, s *schema) bool {
	if n.kind == kBytes {
		return true // null, and every inferred schema is optional
	}
	if n.big || n.kind != s.kind {
		return false
	}
	switch n.kind {
	case kArray:
		for _, k := range n.kids {
			if !fits(k, s.elem) {
				return false
			}
		}
	case kStruct:
		for _, f := range s.fields {
			if k := n.member(f.name); k != nil && !fits(k, f.s) {
				return false
			}
		}
	}
	return true
}

func (n *node) member(name string) *node {
	for i, have := range n.names {
		if have == name {
			return n.kids[i]
		}
	}
	return nil
}

// expand parses p as the router does; ok is false where the payload stays a string.
// Only an object expands into the record: a top-level array gets an array schema
// but no struct value, and Debezium's converter then fails the record.
func (x ExpandJSON) expand(p []byte) (n *node, s *schema, ok bool) {
	if len(p) == 0 || p[0] != '{' {
		return nil, nil, false
	}
	n, err := parseTree(p)
	if err != nil {
		return nil, nil, false
	}
	s, err = x.schemaOf(n)
	if err != nil || s == nil || !fits(n, s) {
		return nil, nil, false
	}
	return n, s, true
}

// valueText is how a value converter writes an expanded payload. Both walk the
// schema alike: every field in the schema's order, looked up in the document.
type valueText struct {
	quote     bool   // strings and field names as JSON strings
	open      string // before a struct's fields
	assign    byte   // between a field's name and its value
	listSep   string // between an array's elements
	skipNulls bool   // an absent or null field is left out rather than written null
}

var (
	// jsonText is JsonConverter (schemas.enable=false): every field of the schema,
	// an absent or null one as null.
	jsonText = valueText{quote: true, open: "{", assign: ':', listSep: ","}
	// structText is Kafka's Struct.toString, which the String converter calls:
	// Struct{name=value,...} without the null fields, lists as Java's [a, b].
	structText = valueText{open: "Struct{", assign: '=', listSep: ", ", skipNulls: true}
)

// append writes the struct n of schema s; doubles as Java's Double.toString.
func (t valueText) append(b []byte, n *node, s *schema) []byte {
	if n == nil || n.kind == kBytes {
		return append(b, "null"...)
	}
	switch s.kind {
	case kString:
		return t.appendString(b, n.text)
	case kBool:
		return strconv.AppendBool(b, n.b)
	case kInt32, kInt64:
		return append(b, n.text...)
	case kFloat64:
		return appendJavaDouble(b, n.f)
	case kArray:
		b = append(b, '[')
		for i, k := range n.kids {
			if i > 0 {
				b = append(b, t.listSep...)
			}
			b = t.append(b, k, s.elem)
		}
		return append(b, ']')
	}
	b = append(b, t.open...)
	first := true
	for _, f := range s.fields {
		k := n.member(f.name)
		if t.skipNulls && (k == nil || k.kind == kBytes) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(t.appendString(b, f.name), t.assign)
		b = t.append(b, k, f.s)
	}
	return append(b, '}')
}

func (t valueText) appendString(b []byte, s string) []byte {
	if t.quote {
		return appendJSONString(b, s)
	}
	return append(b, s...)
}

// appendJavaDouble writes f as Java's Double.toString, which Jackson and
// Struct.toString use: plain with at least one decimal from 10^-3 up to 10^7,
// otherwise d.dddE±n; the digits the shortest that read back as f.
func appendJavaDouble(b []byte, f float64) []byte {
	if f == 0 {
		if math.Signbit(f) {
			return append(b, "-0.0"...)
		}
		return append(b, "0.0"...)
	}
	if a := math.Abs(f); a >= 1e-3 && a < 1e7 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		b = append(b, s...)
		if !strings.Contains(s, ".") {
			b = append(b, ".0"...)
		}
		return b
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // -d.ddde±dd
	mant, exp, _ := strings.Cut(s, "e")
	b = append(b, mant...)
	if !strings.Contains(mant, ".") {
		b = append(b, ".0"...)
	}
	b = append(b, 'E')
	e, _ := strconv.Atoi(exp)
	return strconv.AppendInt(b, int64(e), 10)
}
