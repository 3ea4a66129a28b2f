package record

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// nativeSchema is a native payload's writer schema as the registry gave it,
// parsed once when fetched: the hot path only walks it.
type nativeSchema struct {
	id    int32
	label string // "subject S (schema id N)" or "schema id N", for reasons
	avro  avro.Schema
	// Protobuf: the messages by full name, with their Confluent message
	// indexes, and the first one's name.
	file     protoreflect.FileDescriptor
	messages map[string]*nativeMessage
	first    string
	names    []string
}

type nativeMessage struct {
	desc    protoreflect.MessageDescriptor
	indexes []byte
}

// FetchedSchema is a schema the registry holds, as it gave it.
type FetchedSchema struct {
	ID   int32
	Type string // SchemaAvro, SchemaProtobuf or SchemaJSONSchema
	Text string
	// References counts the schema's references to other subjects.
	References int
}

// NativeRegistry fetches the schemas native payloads are written with:
// package schemaregistry's client.
type NativeRegistry interface {
	// Fetch returns the latest version of need.Subject's schema, or the schema
	// with id need.ID when it is set. A subject or id the registry does not have
	// is a *RefusedError; anything else means it did not answer.
	Fetch(ctx context.Context, need SchemaNeed) (FetchedSchema, error)
}

// native is the schema cached under key (a subject, or # and an id).
func (s *Schemas) native(key []byte) *nativeSchema {
	s.mu.RLock()
	ns := s.natives[string(key)]
	s.mu.RUnlock()
	return ns
}

// StoreNative parses the schema fetched for need and caches it. A schema that
// cannot serve (another type, references, text that does not parse) is a
// *RefusedError: the events that need it are dead letters.
func (s *Schemas) StoreNative(need SchemaNeed, fs FetchedSchema) error {
	where := "subject " + need.Subject
	key := need.Subject
	if need.ID > 0 {
		where, key = fmt.Sprintf("schema id %d", need.ID), fmt.Sprintf("#%d", need.ID)
	}
	refuse := func(msg string) error {
		return &RefusedError{Subject: where, Message: msg}
	}
	ns := &nativeSchema{id: fs.ID, label: fmt.Sprintf("%s (schema id %d)", where, fs.ID)}
	if need.ID > 0 {
		ns.label = where
	}
	if fs.Type != need.Type {
		return refuse(fmt.Sprintf("the registry's schema is %s and value-converter needs %s; "+
			"point native-payload-subject (or the id column) at a %s schema", fs.Type, need.Type, need.Type))
	}
	if fs.References > 0 {
		return refuse("the schema has references to other subjects, which native payloads do not resolve; " +
			"register it self-contained")
	}
	switch fs.Type {
	case SchemaAvro:
		sch, err := avro.ParseWithCache(fs.Text, "", &avro.SchemaCache{})
		if err != nil {
			return refuse(fmt.Sprintf("the Avro schema does not parse: %v", err))
		}
		ns.avro = sch
	case SchemaProtobuf:
		if err := ns.parseProto(fs.Text); err != nil {
			return refuse(fmt.Sprintf("the Protobuf schema does not compile: %v", err))
		}
	default:
		return refuse("native payloads are Avro or Protobuf")
	}
	s.mu.Lock()
	if s.natives == nil {
		s.natives = make(map[string]*nativeSchema)
	}
	s.natives[key] = ns
	s.mu.Unlock()
	return nil
}

// parseProto compiles the schema's .proto text (google/protobuf imports are
// known) and indexes its messages as Confluent's serializer does: the path of
// positions from the file's top-level messages down through nested ones.
func (ns *nativeSchema) parseProto(text string) error {
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"schema.proto": text})})}
	files, err := c.Compile(context.Background(), "schema.proto")
	if err != nil {
		return err
	}
	ns.file = files[0]
	ns.messages = make(map[string]*nativeMessage)
	var walk func(ms protoreflect.MessageDescriptors, path []int)
	walk = func(ms protoreflect.MessageDescriptors, path []int) {
		for i := 0; i < ms.Len(); i++ {
			md := ms.Get(i)
			if md.IsMapEntry() {
				continue
			}
			p := append(path[:len(path):len(path)], i)
			name := string(md.FullName())
			ns.messages[name] = &nativeMessage{desc: md, indexes: appendIndexes(nil, p)}
			ns.names = append(ns.names, name)
			if ns.first == "" {
				ns.first = name
			}
			walk(md.Messages(), p)
		}
	}
	walk(files[0].Messages(), nil)
	if ns.first == "" {
		return errors.New("it declares no message")
	}
	return nil
}

// appendIndexes appends Confluent's message indexes (MessageIndexes.toByteArray):
// the count then each index as zigzag varints, [0] as the single byte 0.
func appendIndexes(b []byte, path []int) []byte {
	if len(path) == 1 && path[0] == 0 {
		return append(b, 0)
	}
	b = protowire.AppendVarint(b, protowire.EncodeZigZag(int64(len(path))))
	for _, i := range path {
		b = protowire.AppendVarint(b, protowire.EncodeZigZag(int64(i)))
	}
	return b
}

// readIndexes reads message indexes at the start of p and the message they name;
// n is the bytes they took.
func (ns *nativeSchema) readIndexes(p []byte) (md protoreflect.MessageDescriptor, n int, err error) {
	v, m := protowire.ConsumeVarint(p)
	if m < 0 {
		return nil, 0, errors.New("no message indexes after the schema id")
	}
	count := protowire.DecodeZigZag(v)
	n = m
	if count == 0 { // [0], written as the single byte 0
		return ns.messageAt([]int64{0}), n, nil
	}
	if count < 0 || count > 32 {
		return nil, 0, fmt.Errorf("message indexes count %d is not a nesting depth", count)
	}
	path := make([]int64, 0, 4)
	for i := int64(0); i < count; i++ {
		v, m := protowire.ConsumeVarint(p[n:])
		if m < 0 {
			return nil, 0, errors.New("message indexes cut short")
		}
		path = append(path, protowire.DecodeZigZag(v))
		n += m
	}
	md = ns.messageAt(path)
	if md == nil {
		return nil, 0, fmt.Errorf("message indexes %v name no message of the schema", path)
	}
	return md, n, nil
}

// messageAt is the message at path, nil when there is none.
func (ns *nativeSchema) messageAt(path []int64) protoreflect.MessageDescriptor {
	ms := ns.file.Messages()
	var md protoreflect.MessageDescriptor
	for _, i := range path {
		if i < 0 || i >= int64(ms.Len()) {
			return nil
		}
		md = ms.Get(int(i))
		ms = md.Messages()
	}
	return md
}

// classify checks p, the payload, against the schema: pre reports a payload
// already framed with the schema's id (passed through as it is); otherwise
// indexes are what follows the id when framing it (Protobuf). message is the
// Protobuf message the event names, empty for the schema's first.
//
// A payload is taken for framed when its first byte is 0, the next four are
// this schema's id, and the rest is well formed for the schema (for Protobuf,
// behind message indexes naming one of its messages). A raw Avro payload can
// begin so by chance; when it is also well formed read whole, which way to take
// it is a guess, and it is refused rather than guessed (native-payload-framed
// never or always settles it). A raw Protobuf message never begins with 0
// (field number 0 does not exist).
func (ns *nativeSchema) classify(p, message []byte, mode Framing) (pre bool, indexes []byte, err error) {
	var want *nativeMessage
	if ns.avro == nil {
		if len(message) == 0 {
			want = ns.messages[ns.first]
		} else if want = ns.messages[string(message)]; want == nil {
			return false, nil, fmt.Errorf("native payload: message %s is not in the Protobuf schema of %s, which declares %s",
				string(message), ns.label, strings.Join(ns.names, ", "))
		}
	}
	looksFramed := len(p) >= 5 && p[0] == 0 && binary.BigEndian.Uint32(p[1:5]) == uint32(ns.id)
	if mode == FramedAlways {
		if !looksFramed {
			return false, nil, fmt.Errorf("native payload: native-payload-framed is always, and the payload does not begin "+
				"with the magic byte 0 and the id %d of the schema of %s", ns.id, ns.label)
		}
		if err := ns.checkFramed(p[5:], want); err != nil {
			return false, nil, fmt.Errorf("native payload: framed, but not %s of the schema of %s: %w", ns.kind(want), ns.label, err)
		}
		return true, nil, nil
	}
	if mode == FramedNever {
		looksFramed = false
	}
	var rawErr error
	if want == nil {
		rawErr = checkAvroBytes(ns.avro, p)
	} else {
		rawErr = checkProtoBytes(want.desc, p)
	}
	if !looksFramed {
		if rawErr != nil {
			return false, nil, fmt.Errorf("native payload: not %s of the schema of %s: %w", ns.kind(want), ns.label, rawErr)
		}
		if want != nil {
			indexes = want.indexes
		}
		return false, indexes, nil
	}
	framedErr := ns.checkFramed(p[5:], want)
	switch {
	case framedErr == nil && rawErr == nil:
		return false, nil, fmt.Errorf("native payload: ambiguous: it reads as %s of the schema of %s both whole and "+
			"framed with that schema's id (its first 5 bytes); refused rather than guessed", ns.kind(want), ns.label)
	case framedErr == nil:
		return true, nil, nil
	case rawErr == nil:
		return false, want.indexesOrNil(), nil
	}
	return false, nil, fmt.Errorf("native payload: not %s of the schema of %s: read whole, %v; read as framed with "+
		"that schema's id, %v", ns.kind(want), ns.label, rawErr, framedErr)
}

func (m *nativeMessage) indexesOrNil() []byte {
	if m == nil {
		return nil
	}
	return m.indexes
}

func (ns *nativeSchema) kind(want *nativeMessage) string {
	if want == nil {
		return "Avro binary"
	}
	return "a Protobuf " + string(want.desc.FullName())
}

// checkFramed checks what follows a framed payload's id.
func (ns *nativeSchema) checkFramed(rest []byte, want *nativeMessage) error {
	if want == nil {
		return checkAvroBytes(ns.avro, rest)
	}
	md, n, err := ns.readIndexes(rest)
	if err != nil {
		return err
	}
	if md.FullName() != want.desc.FullName() {
		return fmt.Errorf("its message indexes name %s, and the event names %s", md.FullName(), want.desc.FullName())
	}
	return checkProtoBytes(md, rest[n:])
}
