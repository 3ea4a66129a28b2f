package record

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/walrelay/walrelay/outbox"
)

// The expectations below follow Confluent's schema-registry sources
// (protobuf-converter ProtobufData, ProtobufDataConfig; protobuf-provider
// ProtobufSchema, ProtobufSchemaUtils, MessageIndexes; protobuf-serializer
// AbstractKafkaProtobufSerializer), with ProtobufConverter's defaults. Each test
// checks walrelay's text and bytes with code independent of the encoder: the text
// compiled by bufbuild/protocompile, the bytes read by google.golang.org/protobuf.

// compileProto compiles text as protoc would and returns the file.
func compileProto(t *testing.T, text string) protoreflect.FileDescriptor {
	t.Helper()
	c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"schema.proto": text}),
	}}
	files, err := c.Compile(context.Background(), "schema.proto")
	if err != nil {
		t.Fatalf("compile:\n%s\n%v", text, err)
	}
	return files[0]
}

// descriptorOf is fd as a FileDescriptorProto without what the text does not
// carry: the file's name, source positions and JSON names.
func descriptorOf(fd protoreflect.FileDescriptor) *descriptorpb.FileDescriptorProto {
	p := protodesc.ToFileDescriptorProto(fd)
	p.Name, p.SourceCodeInfo = nil, nil
	var clear func(ms []*descriptorpb.DescriptorProto)
	clear = func(ms []*descriptorpb.DescriptorProto) {
		for _, m := range ms {
			for _, f := range m.Field {
				f.JsonName = nil
			}
			clear(m.NestedType)
		}
	}
	clear(p.MessageType)
	return p
}

// Helpers to write the expected descriptors.
func pmsg(name string, fields []*descriptorpb.FieldDescriptorProto, nested ...*descriptorpb.DescriptorProto) *descriptorpb.DescriptorProto {
	return &descriptorpb.DescriptorProto{Name: proto.String(name), Field: fields, NestedType: nested}
}

func pfield(name string, num int32, typ descriptorpb.FieldDescriptorProto_Type, repeated bool, typeName string) *descriptorpb.FieldDescriptorProto {
	label := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL
	if repeated {
		label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED
	}
	f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(num), Label: label.Enum(), Type: typ.Enum()}
	if typeName != "" {
		f.TypeName = proto.String(typeName)
	}
	return f
}

func pfile(pkg string, m *descriptorpb.DescriptorProto) *descriptorpb.FileDescriptorProto {
	f := &descriptorpb.FileDescriptorProto{Syntax: proto.String("proto3"), MessageType: []*descriptorpb.DescriptorProto{m}}
	if pkg != "" {
		f.Package = proto.String(pkg)
	}
	return f
}

const (
	tString = descriptorpb.FieldDescriptorProto_TYPE_STRING
	tBytes  = descriptorpb.FieldDescriptorProto_TYPE_BYTES
	tBool   = descriptorpb.FieldDescriptorProto_TYPE_BOOL
	tInt32  = descriptorpb.FieldDescriptorProto_TYPE_INT32
	tInt64  = descriptorpb.FieldDescriptorProto_TYPE_INT64
	tDouble = descriptorpb.FieldDescriptorProto_TYPE_DOUBLE
	tMsg    = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
)

// TestProtobufWrappers: a primitive at the top is the message of its type in
// google/protobuf/wrappers.proto (ProtobufData.descriptorFromConnectSchema:
// STRING -> StringValue, BYTES -> BytesValue, whatever the schema's optionality or
// name), and the schema registered is that whole file as protobuf-java builds it
// (new ProtobufSchema(descriptor) over descriptor.getFile()). Its descriptor must
// equal the well-known file's; the message indexes point at the message in it
// (ProtobufSchema.toMessageIndexes: StringValue is the 8th message, [7]).
func TestProtobufWrappers(t *testing.T) {
	fd := compileProto(t, wrappersProto)
	got, want := descriptorOf(fd), descriptorOf(wrapperspb.File_google_protobuf_wrappers_proto)
	if !proto.Equal(got, want) {
		t.Fatalf("wrappers.proto descriptor\n got %v\nwant %v", got, want)
	}
	for name, idx := range map[protoreflect.FullName][]byte{stringValueName: stringValueIndexes, bytesValueName: bytesValueIndexes} {
		md := fd.Messages().ByName(name.Name())
		if want := []byte{2, byte(md.Index() * 2)}; !bytes.Equal(idx, want) {
			t.Errorf("%s indexes %v, want %v (count 1, index %d, zigzag)", name, idx, want, md.Index())
		}
	}
}

// TestProtobufPrimitives: the key and the value of a text, json, jsonb or bytea
// payload, each a wrapper message. An empty string or byte string is proto3's
// default and left out (ProtobufDataTest.testFromConnectEmptyString: no fields);
// invalid UTF-8 becomes U+FFFD, as the Java string Debezium reads holds it.
func TestProtobufPrimitives(t *testing.T) {
	f := &Format{ExpandJSON: ExpandJSON{Enabled: true, PayloadColumn: "payload"}}
	for _, tc := range []struct {
		name  string
		value bool
		e     outbox.Event
		full  string
		want  proto.Message
	}{
		{"key", false, outbox.Event{AggregateID: "order-42"}, stringValueName, wrapperspb.String("order-42")},
		{"empty key", false, outbox.Event{AggregateID: ""}, stringValueName, wrapperspb.String("")},
		{"text", true, outbox.Event{Payload: []byte("héllo"), PayloadType: "text"}, stringValueName, wrapperspb.String("héllo")},
		// io.debezium.data.Json is a named string: still StringValue, the name lost.
		{"jsonb", true, outbox.Event{Payload: []byte(`[1, 2]`), PayloadType: "jsonb"}, stringValueName, wrapperspb.String(`[1, 2]`)},
		{"json not expandable", true, outbox.Event{Payload: []byte(`{"a": `), PayloadType: "json"}, stringValueName, wrapperspb.String(`{"a": `)},
		{"empty text", true, outbox.Event{Payload: []byte{}, PayloadType: "text"}, stringValueName, wrapperspb.String("")},
		{"invalid utf-8", true, outbox.Event{Payload: []byte("a\xffb"), PayloadType: "text"}, stringValueName, wrapperspb.String("a\uFFFDb")},
		// The router expands only a string, never a bytea.
		{"bytea", true, outbox.Event{Payload: []byte{0, 0xff, '{'}, PayloadType: "bytea"}, bytesValueName, wrapperspb.Bytes([]byte{0, 0xff, '{'})},
		{"empty bytea", true, outbox.Event{Payload: []byte{}, PayloadType: "bytea"}, bytesValueName, wrapperspb.Bytes(nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text, full := protobufSchema(f, tc.value, &tc.e)
			if text != wrappersProto || full != tc.full {
				t.Fatalf("schema %s, want %s in wrappers.proto", full, tc.full)
			}
			b := appendProtobuf([]byte("prefix"), f, tc.value, &tc.e)
			rest, ok := bytes.CutPrefix(b, []byte("prefix"))
			if !ok {
				t.Fatalf("appendProtobuf lost what b held: %q", b)
			}
			idx := stringValueIndexes
			if tc.full == bytesValueName {
				idx = bytesValueIndexes
			}
			msg, ok := bytes.CutPrefix(rest, idx)
			if !ok {
				t.Fatalf("bytes %x do not start with indexes %x", rest, idx)
			}
			got := tc.want.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(msg, got); err != nil {
				t.Fatalf("decode %x: %v", msg, err)
			}
			if !proto.Equal(got, tc.want) {
				t.Errorf("decoded %v, want %v", got, tc.want)
			}
			if want, _ := proto.Marshal(tc.want); !bytes.Equal(msg, want) {
				t.Errorf("message %x, want %x", msg, want)
			}
		})
	}
}

// structCase is an event whose value is a message of its own: its schema text,
// the descriptor that text must compile to, and the values its bytes must hold.
type structCase struct {
	name string
	f    Format
	e    outbox.Event
	text string
	full string
	desc *descriptorpb.FileDescriptorProto
	// want is the decoded message as protojson, walrelay's fields by their names.
	want string
}

func testStructs(t *testing.T, cases []structCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			text, full := protobufSchema(&tc.f, true, &tc.e)
			if text != tc.text || full != tc.full {
				t.Fatalf("schema %s:\n%s\nwant %s:\n%s", full, text, tc.full, tc.text)
			}
			fd := compileProto(t, text)
			if got := descriptorOf(fd); !proto.Equal(got, tc.desc) {
				t.Fatalf("descriptor\n got %v\nwant %v", got, tc.desc)
			}
			md := fd.Messages().ByName(protoreflect.FullName(full).Name())
			if md == nil || md.FullName() != protoreflect.FullName(full) {
				t.Fatalf("no message %s in the schema", full)
			}
			b := appendProtobuf(nil, &tc.f, true, &tc.e)
			// The message is the file's first: indexes [0], the single byte 0
			// (MessageIndexes.toByteArray).
			if len(b) == 0 || b[0] != 0 {
				t.Fatalf("bytes %x do not start with the indexes [0]", b)
			}
			got := dynamicpb.NewMessage(md)
			if err := (proto.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(b[1:], got); err != nil {
				t.Fatalf("decode %x: %v", b[1:], err)
			}
			if len(got.ProtoReflect().GetUnknown()) > 0 {
				t.Fatalf("decoded %v with unknown fields %x", got, got.ProtoReflect().GetUnknown())
			}
			want := dynamicpb.NewMessage(md)
			if err := protojson.Unmarshal([]byte(tc.want), want); err != nil {
				t.Fatalf("expected value %s: %v", tc.want, err)
			}
			if !proto.Equal(got, want) {
				t.Errorf("decoded %v\nwant %v", got, want)
			}
			// protobuf-java writes fields in number order, repeated numbers
			// packed, proto3 defaults left out: the canonical bytes Go writes too.
			if canon, _ := (proto.MarshalOptions{Deterministic: true}).Marshal(want); !bytes.Equal(b[1:], canon) {
				t.Errorf("message %x\nwant      %x", b[1:], canon)
			}
		})
	}
}

// TestProtobufEnvelope: the router's envelope struct (EventRouterDelegate) named
// topic.prefix.schema.table.<aggregate>.Value: splitName makes all but Value the
// package; the payload is field 1 (string for text and json, bytes for bytea), each
// envelope field an optional string numbered after its place
// (messageDefinitionFromConnectSchema: index++ from 1). Optional fields are plain
// proto3 fields (optional.for.nullables and wrapper.for.nullables false), and no
// confluent/meta.proto options are written for them (the meta's params are empty,
// DynamicSchema.toMeta returns null), so nothing is imported. A NULL or empty
// value is left out.
func TestProtobufEnvelope(t *testing.T) {
	env := []outbox.Field{{Key: "eventType", Value: "OrderCreated"}, {Key: "traceId", Null: true}, {Key: "tenant", Value: ""}}
	const text = `syntax = "proto3";
package dbserver1.public.outbox.Order;

message Value {
  string payload = 1;
  string eventType = 2;
  string traceId = 3;
  string tenant = 4;
}
`
	fields := func(payload descriptorpb.FieldDescriptorProto_Type) []*descriptorpb.FieldDescriptorProto {
		return []*descriptorpb.FieldDescriptorProto{pfield("payload", 1, payload, false, ""),
			pfield("eventType", 2, tString, false, ""), pfield("traceId", 3, tString, false, ""), pfield("tenant", 4, tString, false, "")}
	}
	f := Format{TopicPrefix: "dbserver1"}
	ev := func(payload string, typ string, null bool) outbox.Event {
		var p []byte
		if !null {
			p = []byte(payload)
		}
		return outbox.Event{AggregateType: "Order", AggregateID: "42", Table: "public.outbox", Payload: p, PayloadType: typ, NullPayload: null, Envelope: env}
	}
	const full = "dbserver1.public.outbox.Order.Value"
	testStructs(t, []structCase{
		{"jsonb", f, ev(`{"id": 1}`, "jsonb", false), text, full, pfile("dbserver1.public.outbox.Order", pmsg("Value", fields(tString))),
			`{"payload": "{\"id\": 1}", "eventType": "OrderCreated"}`},
		{"null payload", f, ev("", "jsonb", true), text, full, pfile("dbserver1.public.outbox.Order", pmsg("Value", fields(tString))),
			`{"eventType": "OrderCreated"}`},
		{"bytea", f, ev("\x00\x01", "bytea", false), strings.Replace(text, "string payload", "bytes payload", 1), full,
			pfile("dbserver1.public.outbox.Order", pmsg("Value", fields(tBytes))), `{"payload": "AAE=", "eventType": "OrderCreated"}`},
		// Without a table (one outbox table) the name has no table part.
		{"no table", f, outbox.Event{AggregateType: "Order", Payload: []byte("x"), Envelope: env[:1]},
			"syntax = \"proto3\";\npackage dbserver1.Order;\n\nmessage Value {\n  string payload = 1;\n  string eventType = 2;\n}\n",
			"dbserver1.Order.Value",
			pfile("dbserver1.Order", pmsg("Value", []*descriptorpb.FieldDescriptorProto{pfield("payload", 1, tString, false, ""), pfield("eventType", 2, tString, false, "")})),
			`{"payload": "x", "eventType": "OrderCreated"}`},
		// An expanded payload is a struct named after the payload column, payload:
		// the field's name too, so its message is payloadMessage
		// (dataTypeFromConnectSchema; ProtobufDataTest.testFromConnectNameCollision),
		// nested in Value.
		{"expanded", Format{TopicPrefix: "dbserver1", ExpandJSON: ExpandJSON{Enabled: true, PayloadColumn: "payload"}},
			ev(`{"id": 7, "customer": {"name": "Ann"}}`, "jsonb", false),
			`syntax = "proto3";
package dbserver1.public.outbox.Order;

message Value {
  payloadMessage payload = 1;
  string eventType = 2;
  string traceId = 3;
  string tenant = 4;

  message payloadMessage {
    int32 id = 1;
    customerMessage customer = 2;
  ` + `
    message customerMessage {
      string name = 1;
    }
  }
}
`, full,
			pfile("dbserver1.public.outbox.Order", pmsg("Value", []*descriptorpb.FieldDescriptorProto{
				pfield("payload", 1, tMsg, false, ".dbserver1.public.outbox.Order.Value.payloadMessage"),
				pfield("eventType", 2, tString, false, ""), pfield("traceId", 3, tString, false, ""), pfield("tenant", 4, tString, false, "")},
				pmsg("payloadMessage", []*descriptorpb.FieldDescriptorProto{
					pfield("id", 1, tInt32, false, ""),
					pfield("customer", 2, tMsg, false, ".dbserver1.public.outbox.Order.Value.payloadMessage.customerMessage")},
					pmsg("customerMessage", []*descriptorpb.FieldDescriptorProto{pfield("name", 1, tString, false, "")})))),
			`{"payload": {"id": 7, "customer": {"name": "Ann"}}, "eventType": "OrderCreated"}`},
		// Another payload column names the message as it is.
		{"expanded, column data", Format{TopicPrefix: "dbserver1", ExpandJSON: ExpandJSON{Enabled: true, PayloadColumn: "data"}},
			outbox.Event{AggregateType: "Order", Payload: []byte(`{"id": 7}`), PayloadType: "jsonb", Envelope: env[:1]},
			"syntax = \"proto3\";\npackage dbserver1.Order;\n\nmessage Value {\n  data payload = 1;\n  string eventType = 2;\n\n  message data {\n    int32 id = 1;\n  }\n}\n",
			"dbserver1.Order.Value",
			pfile("dbserver1.Order", pmsg("Value", []*descriptorpb.FieldDescriptorProto{
				pfield("payload", 1, tMsg, false, ".dbserver1.Order.Value.data"), pfield("eventType", 2, tString, false, "")},
				pmsg("data", []*descriptorpb.FieldDescriptorProto{pfield("id", 1, tInt32, false, "")}))),
			`{"payload": {"id": 7}, "eventType": "OrderCreated"}`},
		// A payload the converter cannot write stays the string it was.
		{"expanded, nested arrays", Format{TopicPrefix: "dbserver1", ExpandJSON: ExpandJSON{Enabled: true, PayloadColumn: "payload"}},
			ev(`{"a": [[1]]}`, "jsonb", false), text, full, pfile("dbserver1.public.outbox.Order", pmsg("Value", fields(tString))),
			`{"payload": "{\"a\": [[1]]}", "eventType": "OrderCreated"}`},
	})
}

// TestProtobufExpanded: an expanded payload at the top is a struct named after
// the payload column (no package); its fields take their places' numbers and the
// types of their inferred schemas (dataTypeFromConnectSchema: int32, int64,
// double, bool, string, bytes for a kept null); an array is a repeated field of
// its elements' type; a struct a nested message, named <field>Message. Values
// (fromConnectData): nulls and proto3 defaults are left out, an empty array too
// ("if (listValue.isEmpty()) return null"), an empty struct is written.
func TestProtobufExpanded(t *testing.T) {
	on := Format{ExpandJSON: ExpandJSON{Enabled: true, PayloadColumn: "payload"}}
	keep := Format{ExpandJSON: ExpandJSON{Enabled: true, PayloadColumn: "payload", KeepNulls: true, KeepEmptyArrays: true}}
	doc := `{"s": "x", "empty": "", "t": true, "f": false, "i": -5, "zero": 0, "l": 5000000000, "d": 2.5, "nz": -0.0, "dz": 0.0,
		"n": null, "o": {"k": 1}, "eo": {}, "is": [0, 1, -1], "ss": ["a", ""], "ds": [0.5, 0.0], "bs": [true, false],
		"os": [{"a": 1}, {"b": "y"}], "ea": []}`
	ev := outbox.Event{Payload: []byte(doc), PayloadType: "jsonb"}
	testStructs(t, []structCase{
		{"every type", on, ev, `syntax = "proto3";

message payload {
  string s = 1;
  string empty = 2;
  bool t = 3;
  bool f = 4;
  int32 i = 5;
  int32 zero = 6;
  int64 l = 7;
  double d = 8;
  double nz = 9;
  double dz = 10;
  oMessage o = 11;
  eoMessage eo = 12;
  repeated int32 is = 13;
  repeated string ss = 14;
  repeated double ds = 15;
  repeated bool bs = 16;
  repeated osMessage os = 17;

  message oMessage {
    int32 k = 1;
  }
  message eoMessage {}
  message osMessage {
    int32 a = 1;
    string b = 2;
  }
}
`, "payload",
			pfile("", pmsg("payload", []*descriptorpb.FieldDescriptorProto{
				pfield("s", 1, tString, false, ""), pfield("empty", 2, tString, false, ""),
				pfield("t", 3, tBool, false, ""), pfield("f", 4, tBool, false, ""),
				pfield("i", 5, tInt32, false, ""), pfield("zero", 6, tInt32, false, ""), pfield("l", 7, tInt64, false, ""),
				pfield("d", 8, tDouble, false, ""), pfield("nz", 9, tDouble, false, ""), pfield("dz", 10, tDouble, false, ""),
				pfield("o", 11, tMsg, false, ".payload.oMessage"), pfield("eo", 12, tMsg, false, ".payload.eoMessage"),
				pfield("is", 13, tInt32, true, ""), pfield("ss", 14, tString, true, ""), pfield("ds", 15, tDouble, true, ""),
				pfield("bs", 16, tBool, true, ""), pfield("os", 17, tMsg, true, ".payload.osMessage")},
				pmsg("oMessage", []*descriptorpb.FieldDescriptorProto{pfield("k", 1, tInt32, false, "")}),
				pmsg("eoMessage", nil),
				pmsg("osMessage", []*descriptorpb.FieldDescriptorProto{pfield("a", 1, tInt32, false, ""), pfield("b", 2, tString, false, "")}))),
			`{"s": "x", "t": true, "i": -5, "l": "5000000000", "d": 2.5, "nz": -0.0, "o": {"k": 1}, "eo": {},
			  "is": [0, 1, -1], "ss": ["a", ""], "ds": [0.5, 0.0], "bs": [true, false], "os": [{"a": 1}, {"b": "y"}]}`},
		// optional_bytes keeps a null as bytes; optional_string an empty array as
		// repeated string; neither holds a value.
		{"nulls and empty arrays kept", keep, outbox.Event{Payload: []byte(`{"n": null, "ea": [], "v": 1}`), PayloadType: "text"},
			"syntax = \"proto3\";\n\nmessage payload {\n  bytes n = 1;\n  repeated string ea = 2;\n  int32 v = 3;\n}\n", "payload",
			pfile("", pmsg("payload", []*descriptorpb.FieldDescriptorProto{
				pfield("n", 1, tBytes, false, ""), pfield("ea", 2, tString, true, ""), pfield("v", 3, tInt32, false, "")})),
			`{"v": 1}`},
		// An unnamed struct is ConnectDefault1 (getNameOrDefault).
		{"no payload column", Format{ExpandJSON: ExpandJSON{Enabled: true}}, outbox.Event{Payload: []byte(`{"v": 1}`), PayloadType: "jsonb"},
			"syntax = \"proto3\";\n\nmessage ConnectDefault1 {\n  int32 v = 1;\n}\n", "ConnectDefault1",
			pfile("", pmsg("ConnectDefault1", []*descriptorpb.FieldDescriptorProto{pfield("v", 1, tInt32, false, "")})), `{"v": 1}`},
		// Deeper structs nest deeper; a struct in an array of structs too.
		{"deep", on, outbox.Event{Payload: []byte(`{"a": {"b": {"c": "x"}}, "l": [{"m": {"v": 2}}]}`), PayloadType: "jsonb"},
			`syntax = "proto3";

message payload {
  aMessage a = 1;
  repeated lMessage l = 2;

  message aMessage {
    bMessage b = 1;
  ` + `
    message bMessage {
      string c = 1;
    }
  }
  message lMessage {
    mMessage m = 1;
  ` + `
    message mMessage {
      int32 v = 1;
    }
  }
}
`, "payload",
			pfile("", pmsg("payload", []*descriptorpb.FieldDescriptorProto{
				pfield("a", 1, tMsg, false, ".payload.aMessage"), pfield("l", 2, tMsg, true, ".payload.lMessage")},
				pmsg("aMessage", []*descriptorpb.FieldDescriptorProto{pfield("b", 1, tMsg, false, ".payload.aMessage.bMessage")},
					pmsg("bMessage", []*descriptorpb.FieldDescriptorProto{pfield("c", 1, tString, false, "")})),
				pmsg("lMessage", []*descriptorpb.FieldDescriptorProto{pfield("m", 1, tMsg, false, ".payload.lMessage.mMessage")},
					pmsg("mMessage", []*descriptorpb.FieldDescriptorProto{pfield("v", 1, tInt32, false, "")})))),
			`{"a": {"b": {"c": "x"}}, "l": [{"m": {"v": 2}}]}`},
		// A long string and a long nested message: lengths of two bytes.
		{"long", on, outbox.Event{Payload: []byte(`{"o": {"s": "` + strings.Repeat("x", 300) + `"}}`), PayloadType: "jsonb"},
			"syntax = \"proto3\";\n\nmessage payload {\n  oMessage o = 1;\n\n  message oMessage {\n    string s = 1;\n  }\n}\n", "payload",
			pfile("", pmsg("payload", []*descriptorpb.FieldDescriptorProto{pfield("o", 1, tMsg, false, ".payload.oMessage")},
				pmsg("oMessage", []*descriptorpb.FieldDescriptorProto{pfield("s", 1, tString, false, "")}))),
			`{"o": {"s": "` + strings.Repeat("x", 300) + `"}}`},
	})
}

// TestProtobufNotWritable: payloads ProtobufConverter fails on stay the string
// they were (a StringValue), so that no record is lost and every consumer can read
// it: an array of arrays ("Array cannot be nested"), a null in an array
// (DynamicMessage refuses a null element), a member name that is no protobuf
// identifier (scrub.invalid.names is false, so descriptor validation fails), a
// field named as a struct sibling's message, a struct whose message would take its
// parent's name, and a payload column that is no identifier.
func TestProtobufNotWritable(t *testing.T) {
	on := Format{ExpandJSON: ExpandJSON{Enabled: true, PayloadColumn: "payload"}}
	for _, tc := range []struct {
		name string
		f    Format
		doc  string
		// named: the refusal is about names, and the text fromConnectSchema would
		// build must not compile.
		named bool
	}{
		{"array of arrays", on, `{"a": [[1], [2]]}`, false},
		{"array of arrays of structs", on, `{"a": [[{"x": 1}]]}`, false},
		{"null in an array", on, `{"a": [1, null]}`, false},
		{"null struct in an array", on, `{"a": [{"x": 1}, null]}`, false},
		{"only nulls kept", Format{ExpandJSON: ExpandJSON{Enabled: true, PayloadColumn: "payload", KeepNulls: true}}, `{"a": [null]}`, false},
		{"dash in a name", on, `{"first-name": "Ann"}`, true},
		{"digit first", on, `{"1st": 1}`, true},
		{"empty name", on, `{"": 1}`, true},
		{"non-ASCII name", on, `{"näme": 1}`, true},
		{"nested bad name", on, `{"o": {"a b": 1}}`, true},
		{"message name taken", on, `{"x": {"v": 1}, "xMessage": 2}`, true},
		{"parent's name", on, `{"c": {"c": {"v": 1}}}`, false},
		{"bad payload column", Format{ExpandJSON: ExpandJSON{Enabled: true, PayloadColumn: "pay-load"}}, `{"v": 1}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &outbox.Event{Payload: []byte(tc.doc), PayloadType: "jsonb"}
			_, s, ok := tc.f.expanded(e)
			if !ok {
				t.Fatalf("the router does not expand %s; the case tests nothing", tc.doc)
			}
			if tc.named {
				full := structName(tc.f.ExpandJSON.PayloadColumn)
				_, name := splitProtoName(full)
				text, _ := protoText(full, protoMessage(name, s))
				c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{
					Accessor: protocompile.SourceAccessorFromMap(map[string]string{"schema.proto": text})}}
				if _, err := c.Compile(context.Background(), "schema.proto"); err == nil {
					t.Errorf("the schema the converter would build compiles; the refusal is not needed:\n%s", text)
				}
			}
			if text, full := protobufSchema(&tc.f, true, e); text != wrappersProto || full != stringValueName {
				t.Fatalf("schema %s, want %s", full, stringValueName)
			}
			b := appendProtobuf(nil, &tc.f, true, e)
			msg, ok := bytes.CutPrefix(b, stringValueIndexes)
			var got wrapperspb.StringValue
			if !ok || proto.Unmarshal(msg, &got) != nil || got.Value != tc.doc {
				t.Errorf("bytes %x, want the indexes %x and StringValue %q", b, stringValueIndexes, tc.doc)
			}
		})
	}
}

// TestProtobufExpandJSONCorpus: every document the expansion tests use that
// expands is written as a message its own schema reads back with no unknown
// fields and in the canonical encoding.
func TestProtobufExpandJSONCorpus(t *testing.T) {
	expanded := 0
	for _, doc := range []string{
		`{"fullName": "John Doe", "enabled": true, "rating": 4.9, "age": 42, "pets": ["dog", "cat"], "petObjects": [{"type": "dog"}, {"type": "cat"}]}`,
		`{"fullName": "John Doe", "petObjects": [{"type": "dog", "colors": []}, {"type": "cat", "colors": [{"name": "white"}]}]}`,
		`{"a": null, "b": 2.50, "c": 1e20, "d": 0.0001, "e": 100.0, "f": 5000000000}`,
		`{"l": [{"a": 1}, {"b": "x"}]}`,
		`{"a": 1, "b": 2, "a": 3}`,
		`{"a": -2147483648, "b": 2147483647, "c": -9223372036854775808, "d": 9223372036854775807}`,
		`{"u": "\u0000\t\"é😀"}`,
		`{"payload": 1, "o": {"o": 2, "p": {"o": 3}}}`, // a field named as its message
	} {
		for _, x := range []ExpandJSON{{Enabled: true, PayloadColumn: "payload"}, {Enabled: true, PayloadColumn: "payload", KeepNulls: true, KeepEmptyArrays: true}} {
			f := &Format{ExpandJSON: x}
			e := &outbox.Event{Payload: []byte(doc), PayloadType: "jsonb"}
			if _, _, ok := f.expanded(e); !ok {
				// optional_string types the first element's empty array; the
				// second's objects then do not fit and the router keeps the string.
				continue
			}
			expanded++
			text, full := protobufSchema(f, true, e)
			if full != "payload" {
				t.Fatalf("%s: schema %s, want payload", doc, full)
			}
			md := compileProto(t, text).Messages().ByName("payload")
			b := appendProtobuf(nil, f, true, e)
			got := dynamicpb.NewMessage(md)
			if len(b) == 0 || b[0] != 0 {
				t.Fatalf("%s: bytes %x without indexes [0]", doc, b)
			}
			if err := proto.Unmarshal(b[1:], got); err != nil || len(got.ProtoReflect().GetUnknown()) > 0 {
				t.Fatalf("%s: decode %x: %v, unknown %x", doc, b[1:], err, got.ProtoReflect().GetUnknown())
			}
			if canon, _ := (proto.MarshalOptions{Deterministic: true}).Marshal(got); !bytes.Equal(canon, b[1:]) {
				t.Errorf("%s: message %x, canonical %x", doc, b[1:], canon)
			}
			if len(walkWire(t, b[1:])) == 0 {
				t.Errorf("%s: no fields written", doc)
			}
		}
	}
	if expanded < 12 {
		t.Errorf("%d expansions, want at least 12", expanded)
	}
}

// walkWire returns the field numbers of a message's top-level fields, read with
// protowire: a check that the bytes parse field by field.
func walkWire(t *testing.T, b []byte) []int {
	var nums []int
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatalf("bad tag in %x", b)
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			t.Fatalf("bad field %d in %x", num, b)
		}
		b = b[m:]
		nums = append(nums, int(num))
	}
	return nums
}

// TestProtobufInvalid: an envelope whose schema name or field alias is no protobuf
// identifier cannot be written: protobufInvalid says which part, and the text is
// indeed refused by a compiler. Every other shape can be.
func TestProtobufInvalid(t *testing.T) {
	env := []outbox.Field{{Key: "eventType", Value: "x"}}
	for _, tc := range []struct {
		name  string
		f     Format
		value bool
		e     outbox.Event
		part  string // in the error; "" for none
	}{
		{"envelope", Format{TopicPrefix: "dbserver1"}, true, outbox.Event{AggregateType: "Order", Table: "public.outbox", Envelope: env}, ""},
		{"dashed aggregate type", Format{TopicPrefix: "dbserver1"}, true, outbox.Event{AggregateType: "order-created", Envelope: env}, `"order-created"`},
		{"dashed topic prefix", Format{TopicPrefix: "db-1"}, true, outbox.Event{AggregateType: "Order", Envelope: env}, `"db-1"`},
		{"no topic prefix", Format{}, true, outbox.Event{AggregateType: "Order", Envelope: env}, `""`},
		{"table with a dollar", Format{TopicPrefix: "db"}, true, outbox.Event{AggregateType: "Order", Table: "public.out$box", Envelope: env}, `"out$box"`},
		{"dashed alias", Format{TopicPrefix: "db"}, true, outbox.Event{AggregateType: "Order", Envelope: []outbox.Field{{Key: "event-type"}}}, `"event-type"`},
		{"key", Format{}, false, outbox.Event{AggregateID: "a-b", AggregateType: "x-y", Envelope: env}, ""},
		{"text payload", Format{}, true, outbox.Event{AggregateType: "x-y", Payload: []byte("p")}, ""},
		{"expanded payload", Format{ExpandJSON: ExpandJSON{Enabled: true}}, true, outbox.Event{Payload: []byte(`{"a-b": 1}`)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := protobufInvalid(&tc.f, tc.value, &tc.e)
			if tc.part == "" {
				if err != nil {
					t.Fatalf("protobufInvalid: %v", err)
				}
				compileProto(t, func() string { s, _ := protobufSchema(&tc.f, tc.value, &tc.e); return s }())
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.part) {
				t.Fatalf("protobufInvalid: %v, want an error naming %s", err, tc.part)
			}
			text, _ := protobufSchema(&tc.f, tc.value, &tc.e)
			c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{
				Accessor: protocompile.SourceAccessorFromMap(map[string]string{"schema.proto": text})}}
			if _, err := c.Compile(context.Background(), "schema.proto"); err == nil {
				t.Errorf("the schema compiles, yet protobufInvalid refuses it:\n%s", text)
			}
		})
	}
}

// FuzzProtobufExpanded: whatever the document, the value walrelay writes is read
// back by its own schema, compiled independently, as the canonical encoding; a
// struct schema is never given to a document the converter could not write.
func FuzzProtobufExpanded(f *testing.F) {
	for _, doc := range []string{`{"a": 1}`, `{"a": [1, 2], "b": {"c": "x"}}`, `{"l": [{"a": 1}, {"b": "x"}]}`,
		`{"a": [[1]]}`, `{"a": null, "b": [], "c": -0.0, "d": 5000000000}`, `{"x": {"v": 1}, "xMessage": 2}`, `{"a_b": 1, "aB": 2}`} {
		f.Add(doc, false)
		f.Add(doc, true)
	}
	f.Fuzz(func(t *testing.T, doc string, keep bool) {
		fm := &Format{ExpandJSON: ExpandJSON{Enabled: true, PayloadColumn: "payload", KeepNulls: keep, KeepEmptyArrays: keep}}
		e := &outbox.Event{Payload: []byte(doc), PayloadType: "jsonb"}
		text, full := protobufSchema(fm, true, e)
		b := appendProtobuf(nil, fm, true, e)
		if full == stringValueName {
			var got wrapperspb.StringValue
			msg, ok := bytes.CutPrefix(b, stringValueIndexes)
			if !ok || proto.Unmarshal(msg, &got) != nil || !utf8.ValidString(got.Value) {
				t.Fatalf("bytes %x are no StringValue", b)
			}
			return
		}
		c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(map[string]string{"schema.proto": text})}}
		files, err := c.Compile(context.Background(), "schema.proto")
		if err != nil && strings.Contains(err.Error(), "conflicts with default JSON name") {
			t.Skip("members whose JSON names collide: written as the converter writes them, refused by protoc")
		}
		if err != nil {
			t.Fatalf("compile:\n%s\n%v", text, err)
		}
		md := files[0].Messages().ByName("payload")
		if md == nil || len(b) == 0 || b[0] != 0 {
			t.Fatalf("schema %s, bytes %x", full, b)
		}
		got := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(b[1:], got); err != nil || len(got.ProtoReflect().GetUnknown()) > 0 {
			t.Fatalf("decode %x: %v", b[1:], err)
		}
		if canon, _ := (proto.MarshalOptions{Deterministic: true}).Marshal(got); !bytes.Equal(canon, b[1:]) {
			t.Fatalf("message %x, canonical %x", b[1:], canon)
		}
	})
}
