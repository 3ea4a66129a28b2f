package record_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
)

const nativeAvroSchema = `{"type":"record","name":"Placed","namespace":"shop","fields":[
	{"name":"a","type":"long"},{"name":"b","type":"long"},{"name":"c","type":"long"},{"name":"d","type":"long"},
	{"name":"items","type":{"type":"array","items":"long"}},
	{"name":"note","type":["null","string"],"default":null}]}`

const nativeProtoSchema = `syntax = "proto3";
package shop;
message Placed { string order_id = 1; int64 cents = 2; repeated int64 lines = 3; Address to = 4;
  message Address { string city = 1; } }
message Cancelled { string order_id = 1; string reason = 2; }
`

// nativeFormat is a Format for native payloads whose schemas a registry fetch
// gave: the subject's latest version has fs.
func nativeFormat(t *testing.T, c record.Converter, n record.NativePayload, fs record.FetchedSchema, e *outbox.Event) record.Format {
	t.Helper()
	n.Enabled = true
	f := record.Format{ValueConverter: c, Native: n,
		Schemas: &record.Schemas{Topic: func(e *outbox.Event) string { return "outbox." + e.AggregateType }}}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	needs, err := f.Needs(e, nil)
	if err != nil {
		t.Fatalf("Needs before the schema is cached: %v", err)
	}
	if len(needs) != 1 || !needs[0].Native {
		t.Fatalf("needs %+v, want one native need", needs)
	}
	if err := f.Schemas.StoreNative(needs[0], fs); err != nil {
		t.Fatalf("StoreNative: %v", err)
	}
	return f
}

func nativeEvent(payload []byte) *outbox.Event {
	return &outbox.Event{ID: "e1", AggregateType: "order", AggregateID: "o-1", EventType: "placed",
		Payload: payload, PayloadType: "bytea"}
}

func avroBytes(t *testing.T, v any) []byte {
	t.Helper()
	s := avro.MustParse(nativeAvroSchema)
	b, err := avro.Marshal(s, v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type placed struct {
	A     int64   `avro:"a"`
	B     int64   `avro:"b"`
	C     int64   `avro:"c"`
	D     int64   `avro:"d"`
	Items []int64 `avro:"items"`
	Note  *string `avro:"note"`
}

// A raw Avro payload is framed with the id of the subject's latest version, and
// the bytes after the header are the payload, which hamba/avro reads back.
func TestNativeAvroFramed(t *testing.T) {
	note := "gift"
	p := avroBytes(t, placed{A: 1, B: 2, C: 3, D: 4, Items: []int64{5, 6}, Note: &note})
	e := nativeEvent(p)
	f := nativeFormat(t, record.Avro, record.NativePayload{Subject: "{aggregate_type}.{event_type}"},
		record.FetchedSchema{ID: 42, Type: record.SchemaAvro, Text: nativeAvroSchema}, e)
	if needs, err := f.Needs(e, nil); err != nil || len(needs) != 0 {
		t.Fatalf("Needs once cached: %+v, %v", needs, err)
	}
	v, tomb := f.Value(e)
	if tomb || len(v) < 5 || v[0] != 0 || binary.BigEndian.Uint32(v[1:5]) != 42 {
		t.Fatalf("value % x is not framed with id 42", v)
	}
	var got placed
	if err := avro.Unmarshal(avro.MustParse(nativeAvroSchema), v[5:], &got); err != nil {
		t.Fatal(err)
	}
	if got.D != 4 || len(got.Items) != 2 || got.Note == nil || *got.Note != "gift" {
		t.Fatalf("decoded %+v", got)
	}
	if f.Schemas.Misses() != 0 {
		t.Fatalf("misses %d", f.Schemas.Misses())
	}
}

// The subject is the template rendered, and the need says so.
func TestNativeSubjectTemplate(t *testing.T) {
	e := nativeEvent([]byte{2})
	for tmpl, want := range map[string]string{"": "outbox.order-value", "{aggregate_type}.{event_type}": "order.placed",
		"{topic}-{event_type}": "outbox.order-placed"} {
		f := record.Format{ValueConverter: record.Avro, Native: record.NativePayload{Enabled: true, Subject: tmpl},
			Schemas: &record.Schemas{Topic: func(e *outbox.Event) string { return "outbox." + e.AggregateType }}}
		needs, err := f.Needs(e, nil)
		if err != nil || len(needs) != 1 || needs[0].Subject != want || needs[0].Type != record.SchemaAvro {
			t.Errorf("template %q: needs %+v, %v; want subject %s", tmpl, needs, err, want)
		}
	}
	bad := record.Format{ValueConverter: record.Avro, Native: record.NativePayload{Enabled: true, Subject: "{table}-value"}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "{table}") {
		t.Fatalf("Validate of {table}: %v", err)
	}
}

// Taking one for the other, both ways: a payload a registry serializer framed
// with the subject's id passes as it is (never framed twice); a raw payload
// that begins with 0 is framed, whether its next bytes are another id or this
// one with a rest that is not a value; one that reads both ways is refused.
func TestNativeAvroFramedOrRaw(t *testing.T) {
	const id = 8
	fs := record.FetchedSchema{ID: id, Type: record.SchemaAvro, Text: nativeAvroSchema}
	raw := avroBytes(t, placed{A: 0, B: 3, Items: []int64{1}})
	if raw[0] != 0 {
		t.Fatalf("a = 0 should begin with 0: % x", raw)
	}
	// Framed with id 9, which read whole is a block of 5 items in 7 bytes, with
	// 5 left. (With id 8 it reads whole too, a..d = 0 and 4 items: ambiguous.)
	preframed := binary.BigEndian.AppendUint32([]byte{0}, 9)
	preframed = append(preframed, avroBytes(t, placed{A: 7, Items: []int64{}})...)
	// 0 0 0 0 8 2 4 6 8 0 0: read whole a..d = 0 and four items then no note;
	// read as framed with id 8, a..d = 1 2 3 4, no items, no note.
	ambiguous := []byte{0, 0, 0, 0, id, 2, 4, 6, 8, 0, 0}
	// 0 and id 7, then bytes that are no value (a block of 4 items with 2);
	// read whole, a..d = 0 and a block of 4 items in 8 bytes.
	rawLikeFramed := []byte{0, 0, 0, 0, 7, 8, 2, 4, 6, 8, 0, 0}

	for _, c := range []struct {
		name    string
		payload []byte
		framed  bool   // passed through as it is
		refused string // a dead letter with this in its reason
		id      int32  // the schema's; 0: id
	}{
		{"raw beginning with 0", raw, false, "", 0},
		{"framed by a serializer", preframed, true, "", 9},
		{"raw beginning with 0 and the id", rawLikeFramed, false, "", 7},
		{"reads both ways", ambiguous, false, "ambiguous", 0},
		{"framed with another id", append(binary.BigEndian.AppendUint32([]byte{0}, 9), avroBytes(t, placed{})...), false, "not Avro binary", 0},
		{"cut short", raw[:len(raw)-1], false, "not Avro binary of the schema of subject outbox.order-value (schema id 8)", 0},
		{"bytes left over", append(bytes.Clone(raw), 1), false, "bytes are left", 0},
		{"bad union index", []byte{2, 2, 2, 2, 0, 4}, false, "union index 2 out of range", 0},
		{"string not UTF-8", []byte{2, 2, 2, 2, 0, 2, 2, 0xff}, false, "UTF-8", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := nativeEvent(c.payload)
			fs := fs
			if c.id != 0 {
				fs.ID = c.id
			}
			f := nativeFormat(t, record.Avro, record.NativePayload{}, fs, e)
			_, err := f.Needs(e, nil)
			if c.refused != "" {
				var unwritable *record.UnwritableError
				if !errors.As(err, &unwritable) || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("Needs: %v, want an UnwritableError with %q", err, c.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("Needs: %v", err)
			}
			v, _ := f.Value(e)
			if c.framed {
				if !bytes.Equal(v, c.payload) {
					t.Fatalf("framed payload changed: % x, was % x", v, c.payload)
				}
				return
			}
			want := append(binary.BigEndian.AppendUint32([]byte{0}, uint32(fs.ID)), c.payload...)
			if !bytes.Equal(v, want) {
				t.Fatalf("value % x, want the payload framed once: % x", v, want)
			}
			if err := avro.Unmarshal(avro.MustParse(nativeAvroSchema), v[5:], new(placed)); err != nil {
				t.Fatalf("consumer cannot read it: %v", err)
			}
		})
	}
}

func compileProto(t *testing.T, text string) protoreflect.FileDescriptor {
	t.Helper()
	c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"schema.proto": text})}}
	files, err := c.Compile(context.Background(), "schema.proto")
	if err != nil {
		t.Fatal(err)
	}
	return files[0]
}

// protoPayload marshals a message of fd built by set, with dynamicpb.
func protoPayload(t *testing.T, fd protoreflect.FileDescriptor, name string, set func(m *dynamicpb.Message)) []byte {
	t.Helper()
	md := fd.Messages().ByName(protoreflect.Name(name))
	m := dynamicpb.NewMessage(md)
	set(m)
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A Protobuf payload is framed with the id and the message indexes of the
// message the event names (Confluent's MessageIndexes: [0] as the byte 0, [1]
// as 2 2), or as it is when a serializer framed it already; a message the
// schema lacks, bytes that are not its wire format, or a framing for another
// message are dead letters.
func TestNativeProtobuf(t *testing.T) {
	fd := compileProto(t, nativeProtoSchema)
	fs := record.FetchedSchema{ID: 5, Type: record.SchemaProtobuf, Text: nativeProtoSchema}
	placedMsg := protoPayload(t, fd, "Placed", func(m *dynamicpb.Message) {
		f := m.Descriptor().Fields()
		m.Set(f.ByName("order_id"), protoreflect.ValueOfString("o-1"))
		m.Set(f.ByName("cents"), protoreflect.ValueOfInt64(1250))
		l := m.Mutable(f.ByName("lines")).List()
		l.Append(protoreflect.ValueOfInt64(3))
		l.Append(protoreflect.ValueOfInt64(4))
	})
	cancelled := protoPayload(t, fd, "Cancelled", func(m *dynamicpb.Message) {
		m.Set(m.Descriptor().Fields().ByName("reason"), protoreflect.ValueOfString("late"))
	})
	header := func(indexes ...byte) []byte {
		return append(binary.BigEndian.AppendUint32([]byte{0}, 5), indexes...)
	}
	for _, c := range []struct {
		name, message string
		payload       []byte
		want          []byte // the value; nil: the payload as it is
		decodeAs      string
		refused       string
	}{
		{"first message by default", "", placedMsg, append(header(0), placedMsg...), "Placed", ""},
		{"named message", "shop.{event_type}", cancelled, append(header(2, 2), cancelled...), "Cancelled", ""},
		{"framed by a serializer", "shop.Cancelled", append(header(2, 2), cancelled...), nil, "Cancelled", ""},
		{"nested message", "shop.Placed.Address", []byte{0x0a, 0x01, 'x'}, append(header(4, 0, 0), 0x0a, 0x01, 'x'), "", ""},
		{"unknown message", "shop.Shipped", cancelled, nil, "", "message shop.Shipped is not in the Protobuf schema of subject outbox.order-value (schema id 5), which declares shop.Placed, shop.Placed.Address, shop.Cancelled"},
		{"framed for another message", "shop.Placed", append(header(2, 2), cancelled...), nil, "", "message indexes name shop.Cancelled"},
		{"framed with another id", "", append(binary.BigEndian.AppendUint32([]byte{0}, 6), append([]byte{0}, placedMsg...)...), nil, "", "not a Protobuf shop.Placed"},
		{"wrong wire type", "", []byte{0x10 | 2, 0}, nil, "", "field cents: wire type 2"},
		{"cut short", "", placedMsg[:len(placedMsg)-1], nil, "", "not a Protobuf shop.Placed"},
		{"string not UTF-8", "", []byte{0x0a, 1, 0xff}, nil, "", "UTF-8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := nativeEvent(c.payload)
			e.EventType = "Cancelled"
			f := nativeFormat(t, record.Protobuf, record.NativePayload{Message: c.message}, fs, e)
			_, err := f.Needs(e, nil)
			if c.refused != "" {
				var unwritable *record.UnwritableError
				if !errors.As(err, &unwritable) || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("Needs: %v, want an UnwritableError with %q", err, c.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("Needs: %v", err)
			}
			v, _ := f.Value(e)
			want := c.want
			if want == nil {
				want = c.payload
			}
			if !bytes.Equal(v, want) {
				t.Fatalf("value % x, want % x", v, want)
			}
			if c.decodeAs != "" {
				m := dynamicpb.NewMessage(fd.Messages().ByName(protoreflect.Name(c.decodeAs)))
				_, n := consumeIndexes(v[5:])
				if err := proto.Unmarshal(v[5+n:], m); err != nil {
					t.Fatalf("consumer cannot read it: %v", err)
				}
			}
		})
	}
}

// consumeIndexes skips Confluent's message indexes, read as its deserializer does.
func consumeIndexes(b []byte) (count, n int) {
	readZigzag := func() int {
		var u uint64
		for s := 0; ; s += 7 {
			c := b[n]
			n++
			u |= uint64(c&0x7f) << s
			if c < 0x80 {
				return int(u>>1) ^ -int(u&1)
			}
		}
	}
	count = readZigzag()
	for i := 0; i < count; i++ {
		readZigzag()
	}
	return count, n
}

// The schema id may come from a header placed from a column, the message name
// too; the schema is then fetched by id.
func TestNativeIDAndMessageHeaders(t *testing.T) {
	fd := compileProto(t, nativeProtoSchema)
	p := protoPayload(t, fd, "Cancelled", func(m *dynamicpb.Message) {
		m.Set(m.Descriptor().Fields().ByName("order_id"), protoreflect.ValueOfString("o-2"))
	})
	e := nativeEvent(p)
	e.Headers = []outbox.Header{{Key: "schema_id", Value: "77"}, {Key: "message", Value: "shop.Cancelled"}}
	n := record.NativePayload{IDHeader: "schema_id", MessageHeader: "message"}
	f := record.Format{ValueConverter: record.Protobuf, Native: n,
		Schemas: &record.Schemas{Topic: func(*outbox.Event) string { return "t" }}}
	f.Native.Enabled = true
	needs, err := f.Needs(e, nil)
	if err != nil || len(needs) != 1 || needs[0].ID != 77 || needs[0].Subject != "" {
		t.Fatalf("needs %+v, %v; want schema id 77", needs, err)
	}
	if err := f.Schemas.StoreNative(needs[0], record.FetchedSchema{ID: 77, Type: record.SchemaProtobuf, Text: nativeProtoSchema}); err != nil {
		t.Fatal(err)
	}
	v, _ := f.Value(e)
	if want := append(binary.BigEndian.AppendUint32([]byte{0}, 77), append([]byte{2, 2}, p...)...); !bytes.Equal(v, want) {
		t.Fatalf("value % x, want % x", v, want)
	}
	for _, h := range [][]outbox.Header{nil, {{Key: "schema_id", Value: "x"}}} {
		e.Headers = h
		if _, err := f.Needs(e, nil); err == nil || !strings.Contains(err.Error(), "schema_id") {
			t.Errorf("headers %v: %v, want a reason naming schema_id", h, err)
		}
	}
}

// A schema that cannot serve is refused: another type, references, text that
// does not parse; a text payload column is a dead letter.
func TestNativeRefused(t *testing.T) {
	need := record.SchemaNeed{Subject: "s", Schema: "s", Type: record.SchemaProtobuf, Native: true, Value: true}
	s := &record.Schemas{}
	for fs, want := range map[record.FetchedSchema]string{
		{ID: 1, Type: record.SchemaAvro, Text: nativeAvroSchema}:                     "is AVRO and value-converter needs PROTOBUF",
		{ID: 1, Type: record.SchemaProtobuf, Text: nativeProtoSchema, References: 1}: "references",
		{ID: 1, Type: record.SchemaProtobuf, Text: "message {"}:                      "does not compile",
	} {
		var refused *record.RefusedError
		if err := s.StoreNative(need, fs); !errors.As(err, &refused) || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want a refusal with %q", fs, err, want)
		}
	}
	e := nativeEvent([]byte{2})
	e.PayloadType = "jsonb"
	f := record.Format{ValueConverter: record.Avro, Native: record.NativePayload{Enabled: true}, Schemas: &record.Schemas{}}
	if _, err := f.Needs(e, nil); err == nil || !strings.Contains(err.Error(), "not bytea") {
		t.Fatalf("jsonb payload: %v", err)
	}
}

// native-payload-framed settles what detection refuses: never frames a payload
// that reads both ways, always passes it as it is and refuses a raw one.
func TestNativeFramingSettled(t *testing.T) {
	fs := record.FetchedSchema{ID: 8, Type: record.SchemaAvro, Text: nativeAvroSchema}
	ambiguous := []byte{0, 0, 0, 0, 8, 2, 4, 6, 8, 0, 0}
	raw := avroBytes(t, placed{A: 1})
	for _, c := range []struct {
		mode    record.Framing
		payload []byte
		want    []byte
		refused string
	}{
		{record.FramedNever, ambiguous, append([]byte{0, 0, 0, 0, 8}, ambiguous...), ""},
		{record.FramedNever, raw, append([]byte{0, 0, 0, 0, 8}, raw...), ""},
		{record.FramedAlways, ambiguous, ambiguous, ""},
		{record.FramedAlways, raw, nil, "native-payload-framed is always"},
		{record.FramedAlways, []byte{0, 0, 0, 0, 8, 0xff}, nil, "framed, but not Avro binary"},
	} {
		e := nativeEvent(c.payload)
		f := nativeFormat(t, record.Avro, record.NativePayload{Framed: c.mode}, fs, e)
		_, err := f.Needs(e, nil)
		if c.refused != "" {
			if err == nil || !strings.Contains(err.Error(), c.refused) {
				t.Errorf("%s % x: %v, want a refusal with %q", c.mode, c.payload, err, c.refused)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s % x: %v", c.mode, c.payload, err)
			continue
		}
		if v, _ := f.Value(e); !bytes.Equal(v, c.want) {
			t.Errorf("%s % x: value % x, want % x", c.mode, c.payload, v, c.want)
		}
	}
	if m, err := record.ParseFraming("sometimes"); err == nil {
		t.Errorf("ParseFraming(sometimes) = %v", m)
	}
}

// The check runs on the stream's goroutine for every event: it allocates
// nothing once the schema is cached (docs/configuration.md, "Native payloads").
func TestNativeCheckAllocatesNothing(t *testing.T) {
	fd := compileProto(t, nativeProtoSchema)
	pp := protoPayload(t, fd, "Placed", func(m *dynamicpb.Message) {
		m.Set(m.Descriptor().Fields().ByName("order_id"), protoreflect.ValueOfString("o-1"))
	})
	pe := nativeEvent(pp)
	pf := nativeFormat(t, record.Protobuf, record.NativePayload{Message: "shop.{event_type}"},
		record.FetchedSchema{ID: 3, Type: record.SchemaProtobuf, Text: nativeProtoSchema}, pe)
	pe.EventType = "Placed"
	ae := nativeEvent(avroBytes(t, placed{A: 1, Items: []int64{2, 3}}))
	af := nativeFormat(t, record.Avro, record.NativePayload{},
		record.FetchedSchema{ID: 3, Type: record.SchemaAvro, Text: nativeAvroSchema}, ae)
	for name, c := range map[string]struct {
		f record.Format
		e *outbox.Event
	}{"avro": {af, ae}, "protobuf": {pf, pe}} {
		c.f.Schemas.Topic = func(*outbox.Event) string { return "outbox.order" }
		needs := make([]record.SchemaNeed, 0, 2)
		if n := testing.AllocsPerRun(100, func() {
			var err error
			if needs, err = c.f.Needs(c.e, needs[:0]); err != nil || len(needs) != 0 {
				t.Fatal(needs, err)
			}
		}); n != 0 {
			t.Errorf("%s: Needs allocates %.0f times per event", name, n)
		}
	}
}

// proto2: a message without a required field is refused, as a decoder refuses
// it; a field number past the largest valid one too.
func TestNativeProto2Required(t *testing.T) {
	fs := record.FetchedSchema{ID: 4, Type: record.SchemaProtobuf, Text: nativeProto2Schema}
	for payload, want := range map[string]string{
		"\x10\x05":                  "required field id is missing",
		"\x0a\x01x\x1a\x00":         "legacy.Order.Line: required field qty is missing",
		"\xd5\xd5\xd5\xd5\x30":      "field number",
		"\x0a\x01x\x1a\x02\x08\x01": "",
	} {
		e := nativeEvent([]byte(payload))
		f := nativeFormat(t, record.Protobuf, record.NativePayload{}, fs, e)
		_, err := f.Needs(e, nil)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("% x: %v, want %q", payload, err, want)
		}
	}
}
