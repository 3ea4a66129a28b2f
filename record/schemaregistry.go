package record

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/walrelay/walrelay/outbox"
)

// The registry converters (Avro, Protobuf, JSON Schema) write Confluent's wire
// format: the magic byte 0, the schema's registry id as 4 big-endian bytes, then the
// converter's own bytes (AbstractKafkaSchemaSerDe.MAGIC_BYTE and idSize). Each
// converter is a pair of functions over the same event: the schema text registered
// for the key or the value with the name of its top-level record (empty when it has
// none), and the bytes written after the header. Ids come from Schemas, a cache the
// relay fills before it hands an event to a sink (docs/design.md, "Schema
// registry"): a sink's Key and Value never call the registry.

// Schema types as the registry's REST API names them (schemaType).
const (
	SchemaAvro       = "AVRO"
	SchemaProtobuf   = "PROTOBUF"
	SchemaJSONSchema = "JSON"
)

// registeredConverter is one registry converter's pair.
type registeredConverter struct {
	schemaType string
	schema     func(f *Format, value bool, e *outbox.Event) (text, fullName string)
	append     func(b []byte, f *Format, value bool, e *outbox.Event) []byte
	// check, when set, says why e cannot be written (a name the format refuses).
	check func(f *Format, value bool, e *outbox.Event) error
}

// converterOf is c's pair; ok is false for the converters without a registry.
func converterOf(c Converter) (registeredConverter, bool) {
	switch c {
	case Avro:
		return registeredConverter{SchemaAvro, avroSchema, appendAvro, checkAvro}, true
	case JSONSchema:
		return registeredConverter{SchemaJSONSchema, jsonSchemaSchema, appendJSONSchema, nil}, true
	case Protobuf:
		return registeredConverter{SchemaProtobuf, protobufSchema, appendProtobuf, protobufInvalid}, true
	}
	return registeredConverter{}, false
}

// SubjectStrategy names the subject a schema is registered under, as Confluent's
// key.subject.name.strategy and value.subject.name.strategy.
type SubjectStrategy uint8

const (
	// TopicName is TopicNameStrategy: <topic>-key or <topic>-value.
	TopicName SubjectStrategy = iota
	// RecordName is RecordNameStrategy: the schema's record full name.
	RecordName
	// TopicRecordName is TopicRecordNameStrategy: <topic>-<record full name>.
	TopicRecordName
)

// ParseSubjectStrategy reads topic, record or topic-record.
func ParseSubjectStrategy(s string) (SubjectStrategy, error) {
	switch s {
	case "", "topic":
		return TopicName, nil
	case "record":
		return RecordName, nil
	case "topic-record":
		return TopicRecordName, nil
	}
	return 0, fmt.Errorf("subject name strategy %q is not topic, record or topic-record", s)
}

func (s SubjectStrategy) String() string {
	switch s {
	case RecordName:
		return "record"
	case TopicRecordName:
		return "topic-record"
	}
	return "topic"
}

// SchemaNeed is a schema an event's key or value needs an id for.
type SchemaNeed struct {
	Subject string
	Type    string // SchemaAvro, SchemaProtobuf or SchemaJSONSchema
	Schema  string
	Value   bool // the value's schema, not the key's
	// Native: the schema a native payload was written with, fetched from the
	// registry (NativeRegistry) rather than registered; Schema is then where it is
	// found, the subject or # and its id. ID, when set, is its id, and Subject is
	// empty.
	Native bool
	ID     int32
}

// Schemas holds the registry ids the converters write, by subject and schema text.
// Entries are never dropped: a relay writes a bounded set of shapes. Share one
// *Schemas between the Format every sink holds and whatever resolves ids before
// publishing (relay.Config.Schemas).
type Schemas struct {
	// KeyStrategy and ValueStrategy name the subjects.
	KeyStrategy, ValueStrategy SubjectStrategy
	// Topic is the topic an event goes to, which the topic strategies name
	// subjects after.
	Topic func(e *outbox.Event) string

	mu  sync.RWMutex
	ids map[schemaKey]int32
	// natives are native payloads' schemas by subject, or # and an id.
	natives map[string]*nativeSchema
	// expansion is the last payload expanded and what it became (expandedOnce).
	expansion atomic.Pointer[expansion]
	// misses counts ids asked for while not cached: a Value written before its
	// schema was resolved, which the relay never lets happen (Misses).
	misses atomic.Int64
}

type schemaKey struct{ subject, schema string }

// ID returns the cached id of schema under subject.
func (s *Schemas) ID(subject, schema string) (int32, bool) {
	s.mu.RLock()
	id, ok := s.ids[schemaKey{subject, schema}]
	s.mu.RUnlock()
	return id, ok
}

// Cached reports whether need's id (or native schema) is cached.
func (s *Schemas) Cached(need SchemaNeed) bool {
	if need.Native {
		return s.native([]byte(need.Schema)) != nil
	}
	_, ok := s.ID(need.Subject, need.Schema)
	return ok
}

// Store caches the id of schema under subject.
func (s *Schemas) Store(subject, schema string, id int32) {
	s.mu.Lock()
	if s.ids == nil {
		s.ids = make(map[schemaKey]int32)
	}
	s.ids[schemaKey{subject, schema}] = id
	s.mu.Unlock()
}

// Misses counts the keys and values written without their id cached, with the id
// 0 that no registry gives, so that a consumer fails on them rather than reading
// them with a wrong schema. It stays 0 unless something published without
// resolving first.
func (s *Schemas) Misses() int64 { return s.misses.Load() }

// UnwritableError is an event the converters cannot write whatever the registry
// says (a field name Avro refuses): a dead letter at once.
type UnwritableError struct{ Err error }

func (e *UnwritableError) Error() string { return e.Err.Error() }
func (e *UnwritableError) Unwrap() error { return e.Err }

// ErrNoSchemas: a registry converter without Format.Schemas.
var ErrNoSchemas = errors.New("a registry converter needs Format.Schemas")

// Needs appends to dst the schemas e's key and value need whose ids are not
// cached, and returns it; an *UnwritableError when e cannot be written. With no
// registry converter it appends nothing, at no cost.
func (f *Format) Needs(e *outbox.Event, dst []SchemaNeed) ([]SchemaNeed, error) {
	for _, value := range []bool{false, true} {
		c := f.KeyConverter
		if value {
			c = f.ValueConverter
		}
		rc, ok := converterOf(c)
		if !ok {
			continue
		}
		if value && (f.TombstoneOnEmpty && (e.NullPayload || blank(e.Payload)) || e.NullPayload && len(e.Envelope) == 0) {
			continue // a tombstone has no schema
		}
		if f.Schemas == nil {
			return dst, ErrNoSchemas
		}
		if value && f.Native.Enabled {
			var err error
			if dst, err = f.nativeNeeds(e, dst); err != nil {
				return dst, err
			}
			continue
		}
		var text, name string
		if c == Avro && value { // the payload expanded once for the check and the schema
			var s *schema
			var expanded bool
			_, s, expanded, text, name = f.avroValueSchemaOnce(e)
			if err := checkAvroValue(f, e, s, expanded); err != nil {
				return dst, &UnwritableError{Err: err}
			}
		} else {
			if rc.check != nil {
				if err := rc.check(f, value, e); err != nil {
					return dst, &UnwritableError{Err: err}
				}
			}
			text, name = rc.schema(f, value, e)
		}
		subject, err := f.subject(value, e, name)
		if err != nil {
			return dst, &UnwritableError{Err: err}
		}
		if _, ok := f.Schemas.ID(subject, text); !ok {
			dst = append(dst, SchemaNeed{Subject: subject, Type: rc.schemaType, Schema: text, Value: value})
		}
	}
	return dst, nil
}

// subject is the subject of e's key or value schema, whose record full name is
// name (empty: none).
func (f *Format) subject(value bool, e *outbox.Event, name string) (string, error) {
	st, suffix := f.Schemas.KeyStrategy, "-key"
	if value {
		st, suffix = f.Schemas.ValueStrategy, "-value"
	}
	if st != TopicName && name == "" {
		side := "key"
		if value {
			side = "value"
		}
		return "", fmt.Errorf("%s-subject-name-strategy %s needs a schema with a record name, and this %s's has none", side, st, side)
	}
	switch st {
	case RecordName:
		return name, nil
	case TopicRecordName:
		return f.Schemas.Topic(e) + "-" + name, nil
	}
	return f.Schemas.Topic(e) + suffix, nil
}

// framed appends the key's or value's bytes in the wire format to b.
func (f *Format) framed(b []byte, c Converter, value bool, e *outbox.Event) []byte {
	if c == Avro && value {
		return f.framedAvroValue(b, e)
	}
	rc, _ := converterOf(c)
	text, name := rc.schema(f, value, e)
	return rc.append(f.appendHeader(b, value, e, text, name), f, value, e)
}

// appendHeader appends the magic byte and the id cached for the schema text of
// e's key or value, whose record is name; 0 when not cached (Misses).
func (f *Format) appendHeader(b []byte, value bool, e *outbox.Event, text, name string) []byte {
	var id int32
	if f.Schemas != nil {
		if subject, err := f.subject(value, e, name); err == nil {
			var ok bool
			if id, ok = f.Schemas.ID(subject, text); !ok {
				f.Schemas.misses.Add(1)
			}
		}
	}
	b = append(b, 0)
	return binary.BigEndian.AppendUint32(b, uint32(id))
}

// Registry is what resolves a schema to its id: package schemaregistry's client.
type Registry interface {
	// Resolve returns the id of need's schema under its subject: registered, or
	// looked up, as the client is configured. A refusal (the schema is invalid or
	// incompatible) is a *RefusedError; anything else means the registry did not
	// answer and may later.
	Resolve(ctx context.Context, need SchemaNeed) (int32, error)
}

// RefusedError is the registry refusing a schema (HTTP 409 or 422): the events
// that need it are dead letters, with its message.
type RefusedError struct {
	Subject string
	Status  int
	Message string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("schema registry refused the schema of subject %s (HTTP %d): %s", e.Subject, e.Status, e.Message)
}

// expansion is a payload and what ExpandJSON made of it; never changed once made.
type expansion struct {
	payload []byte // a copy
	n       *node
	s       *schema
	ok      bool
	// avro is the Avro schema text of the bare expanded value (no envelope),
	// made on first use.
	avro atomic.Pointer[string]
}

// expandedOnce is f.expanded, remembering the last payload: the relay checks an
// event's ids (Needs) right before the sink writes its value, and each would
// parse the payload again. A payload equal to the last one takes its expansion,
// which depends on nothing else (the Format's options are Schemas'); comparing the
// bytes costs far less than parsing them.
func (f *Format) expandedOnce(e *outbox.Event) (*node, *schema, bool) {
	x := f.expansionOf(e)
	if x == nil {
		return f.expanded(e)
	}
	return x.n, x.s, x.ok
}

// expansionOf is the remembered expansion of e's payload (expandedOnce), nil
// where nothing is expanded or remembered.
func (f *Format) expansionOf(e *outbox.Event) *expansion {
	if f.Schemas == nil || !f.ExpandJSON.Enabled || e.NullPayload || e.PayloadType == "bytea" {
		return nil
	}
	if x := f.Schemas.expansion.Load(); x != nil && bytes.Equal(x.payload, e.Payload) {
		return x
	}
	prev := f.Schemas.expansion.Load()
	n, s, ok := f.expanded(e)
	x := &expansion{payload: bytes.Clone(e.Payload), n: n, s: s, ok: ok}
	x.inherit(prev)
	f.Schemas.expansion.Store(x)
	return x
}

// avroValueSchemaOnce is avroValueSchema, the bare expanded value's text made
// once per remembered expansion.
func (f *Format) avroValueSchemaOnce(e *outbox.Event) (n *node, s *schema, expanded bool, text, name string) {
	x := f.expansionOf(e)
	if x == nil {
		n, s, expanded = f.expanded(e)
		text, name = avroValueSchema(f, e, s, expanded)
		return n, s, expanded, text, name
	}
	if !x.ok || len(e.Envelope) > 0 {
		text, name = avroValueSchema(f, e, x.s, x.ok)
		return x.n, x.s, x.ok, text, name
	}
	if t := x.avro.Load(); t != nil {
		return x.n, x.s, true, *t, ""
	}
	text, name = avroValueSchema(f, e, x.s, true)
	x.storeAvro(text)
	return x.n, x.s, true, text, name
}

// storeAvro keeps the text on the heap for this expansion alone, so that the
// callers' own strings do not escape.
func (x *expansion) storeAvro(text string) { x.avro.Store(&text) }
