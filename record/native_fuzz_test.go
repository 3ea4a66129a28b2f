package record_test

import (
	"encoding/binary"
	"testing"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/walrelay/walrelay/record"
)

const nativeProto2Schema = `syntax = "proto2";
package legacy;
message Order { required string id = 1; optional int64 cents = 2; repeated Line lines = 3; map<string, int32> tags = 4;
  message Line { required int32 qty = 1; optional fixed64 sku = 2; } }
`

// FuzzNativePayload: whatever the payload, the check does not panic, and what
// it passes a consumer reads: the value, framed or passed through, decodes with
// hamba/avro (Avro) or google.golang.org/protobuf's dynamicpb (Protobuf, proto3
// and proto2) against the schema, behind the header its id names.
func FuzzNativePayload(f *testing.F) {
	t := &testing.T{}
	for _, seed := range [][]byte{
		{}, {0}, {0, 0, 0, 0, 8, 2, 4, 6, 8, 0, 0}, {2, 2, 2, 2, 0, 2, 2, 'x'},
		{0x0a, 1, 'x', 0x10, 5, 0x1a, 2, 3, 4}, {0, 0, 0, 0, 8, 0, 0x0a, 1, 'x'}, {0x0a, 0, 0x1a, 2, 8, 1},
		{0, 0, 0, 0, 8, 2, 4, 0, 0x0a, 0},
	} {
		f.Add(seed, uint8(0))
	}
	type target struct {
		format record.Format
		schema string
		proto  protoreflect.FileDescriptor
	}
	var targets []target
	for _, c := range []struct {
		conv   record.Converter
		typ    string
		text   string
		native record.NativePayload
	}{
		{record.Avro, record.SchemaAvro, nativeAvroSchema, record.NativePayload{}},
		{record.Protobuf, record.SchemaProtobuf, nativeProtoSchema, record.NativePayload{}},
		{record.Protobuf, record.SchemaProtobuf, nativeProtoSchema, record.NativePayload{Message: "shop.Placed.Address"}},
		{record.Protobuf, record.SchemaProtobuf, nativeProto2Schema, record.NativePayload{}},
	} {
		tg := target{schema: c.text}
		tg.format = nativeFormat(t, c.conv, c.native, record.FetchedSchema{ID: 8, Type: c.typ, Text: c.text}, nativeEvent(nil))
		if c.conv == record.Protobuf {
			tg.proto = compileProto(t, c.text)
		}
		targets = append(targets, tg)
	}
	if t.Failed() {
		f.Fatal("setting up the targets failed")
	}
	avroSchema := avro.MustParse(nativeAvroSchema)
	f.Fuzz(func(t *testing.T, payload []byte, mode uint8) {
		e := nativeEvent(payload)
		for _, tg := range targets {
			fm := tg.format
			fm.Native.Framed = record.Framing(mode % 3)
			if _, err := fm.Needs(e, nil); err != nil {
				continue
			}
			v, _ := fm.Value(e)
			if len(v) < 5 || v[0] != 0 || binary.BigEndian.Uint32(v[1:5]) != 8 {
				t.Fatalf("passed % x, wrote % x: not framed with id 8", payload, v)
			}
			if tg.proto == nil {
				var out any
				if err := avro.Unmarshal(avroSchema, v[5:], &out); err != nil {
					t.Fatalf("passed % x, and hamba/avro cannot read it: %v", payload, err)
				}
				continue
			}
			count, n := consumeIndexesSafe(v[5:])
			if n < 0 {
				t.Fatalf("passed % x, wrote % x: message indexes unreadable", payload, v)
			}
			md := tg.proto.Messages().Get(0)
			if count.path != nil {
				ms := tg.proto.Messages()
				for _, i := range count.path {
					md = ms.Get(i)
					ms = md.Messages()
				}
			}
			if err := proto.Unmarshal(v[5+n:], dynamicpb.NewMessage(md)); err != nil {
				t.Fatalf("passed % x, and dynamicpb cannot read it as %s: %v", payload, md.FullName(), err)
			}
		}
	})
}

type indexPath struct{ path []int }

// consumeIndexesSafe reads Confluent's message indexes; n < 0 when they do not
// read.
func consumeIndexesSafe(b []byte) (indexPath, int) {
	n := 0
	read := func() (int, bool) {
		var u uint64
		for s := 0; s < 64; s += 7 {
			if n >= len(b) {
				return 0, false
			}
			c := b[n]
			n++
			u |= uint64(c&0x7f) << s
			if c < 0x80 {
				return int(u>>1) ^ -int(u&1), true
			}
		}
		return 0, false
	}
	count, ok := read()
	if !ok {
		return indexPath{}, -1
	}
	if count == 0 {
		return indexPath{path: []int{0}}, n
	}
	p := indexPath{}
	for range count {
		i, ok := read()
		if !ok {
			return indexPath{}, -1
		}
		p.path = append(p.path, i)
	}
	return p, n
}
