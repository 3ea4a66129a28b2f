package record_test

import (
	"testing"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
)

// What a native payload costs per event: the relay's Needs (which checks the
// bytes) and the sink's Value (which checks them again to frame them), against
// a full decode of the same bytes, the check not chosen (docs/performance.md).

func benchNative(b *testing.B, f record.Format, e *outbox.Event) {
	b.ReportAllocs()
	b.SetBytes(int64(len(e.Payload)))
	var needs []record.SchemaNeed
	for b.Loop() {
		var err error
		if needs, err = f.Needs(e, needs[:0]); err != nil || len(needs) != 0 {
			b.Fatal(needs, err)
		}
		if v, _ := f.Value(e); len(v) == 0 {
			b.Fatal("no value")
		}
	}
}

func nativeAvroBench(b *testing.B) (record.Format, *outbox.Event) {
	note := "leave at the door"
	p, err := avro.Marshal(avro.MustParse(nativeAvroSchema),
		placed{A: 1, B: 1250, C: 3, D: 1733500000, Items: []int64{4, 5, 6, 7, 8}, Note: &note})
	if err != nil {
		b.Fatal(err)
	}
	e := nativeEvent(p)
	t := &testing.T{}
	return nativeFormat(t, record.Avro, record.NativePayload{}, record.FetchedSchema{ID: 3, Type: record.SchemaAvro, Text: nativeAvroSchema}, e), e
}

func BenchmarkNativeAvro(b *testing.B) {
	f, e := nativeAvroBench(b)
	benchNative(b, f, e)
}

// BenchmarkNativeAvroFullDecode is the check not chosen: decoding the bytes into
// values with hamba/avro, once.
func BenchmarkNativeAvroFullDecode(b *testing.B) {
	_, e := nativeAvroBench(b)
	s := avro.MustParse(nativeAvroSchema)
	b.ReportAllocs()
	b.SetBytes(int64(len(e.Payload)))
	for b.Loop() {
		var v placed
		if err := avro.Unmarshal(s, e.Payload, &v); err != nil {
			b.Fatal(err)
		}
	}
}

func nativeProtoBench(b *testing.B) (record.Format, *outbox.Event, protoreflect.MessageDescriptor) {
	t := &testing.T{}
	fd := compileProto(t, nativeProtoSchema)
	md := fd.Messages().ByName("Placed")
	m := dynamicpb.NewMessage(md)
	m.Set(md.Fields().ByName("order_id"), protoreflect.ValueOfString("3f6c2a4e-8d1b-4f8e-9c39-5b1f0e7d2a61"))
	m.Set(md.Fields().ByName("cents"), protoreflect.ValueOfInt64(1250))
	l := m.Mutable(md.Fields().ByName("lines")).List()
	for i := range 5 {
		l.Append(protoreflect.ValueOfInt64(int64(i)))
	}
	to := m.Mutable(md.Fields().ByName("to")).Message()
	to.Set(md.Messages().ByName("Address").Fields().ByName("city"), protoreflect.ValueOfString("Lyon"))
	p, err := proto.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	e := nativeEvent(p)
	f := nativeFormat(t, record.Protobuf, record.NativePayload{Message: "shop.Placed"},
		record.FetchedSchema{ID: 3, Type: record.SchemaProtobuf, Text: nativeProtoSchema}, e)
	return f, e, md
}

func BenchmarkNativeProtobuf(b *testing.B) {
	f, e, _ := nativeProtoBench(b)
	benchNative(b, f, e)
}

// BenchmarkNativeProtobufFullDecode is the check not chosen: dynamicpb decoding
// the message, once.
func BenchmarkNativeProtobufFullDecode(b *testing.B) {
	_, e, md := nativeProtoBench(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(e.Payload)))
	for b.Loop() {
		if err := proto.Unmarshal(e.Payload, dynamicpb.NewMessage(md)); err != nil {
			b.Fatal(err)
		}
	}
}

// benchNativeNeeds is the check alone, as the relay runs it per event (Needs),
// with a topic that costs nothing, as the relay's rendered-topic cache.
func benchNativeNeeds(b *testing.B, f record.Format, e *outbox.Event) {
	f.Schemas.Topic = func(*outbox.Event) string { return "outbox.order" }
	b.ReportAllocs()
	b.SetBytes(int64(len(e.Payload)))
	var needs []record.SchemaNeed
	for b.Loop() {
		var err error
		if needs, err = f.Needs(e, needs[:0]); err != nil || len(needs) != 0 {
			b.Fatal(needs, err)
		}
	}
}

func BenchmarkNativeAvroCheck(b *testing.B) {
	f, e := nativeAvroBench(b)
	benchNativeNeeds(b, f, e)
}

func BenchmarkNativeProtobufCheck(b *testing.B) {
	f, e, _ := nativeProtoBench(b)
	benchNativeNeeds(b, f, e)
}
