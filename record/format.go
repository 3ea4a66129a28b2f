package record

import (
	"errors"
	"time"
	"unsafe"

	"github.com/walrelay/walrelay/outbox"
)

// Format is how events become records: the converters of the key and the value, and
// the outbox router options that change a record. The zero Format is walrelay's own.
type Format struct {
	// KeyConverter and ValueConverter are Kafka Connect's key.converter and
	// value.converter.
	KeyConverter, ValueConverter Converter
	// KeySchemas and ValueSchemas are the JSON converter's schemas.enable: the JSON
	// goes inside {"schema":…,"payload":…}.
	KeySchemas, ValueSchemas bool
	// TombstoneOnEmpty makes a NULL, empty or blank payload a null value whatever the
	// converter (the router's route.tombstone.on.empty.payload). Without it only the
	// String and ByteArray converters write a NULL payload as a null value.
	TombstoneOnEmpty bool
	// EventTimestamp makes the event's creation time (column-created-at) the record
	// timestamp (the router's table.field.event.timestamp); otherwise it is the time
	// of publishing, as Debezium's is the time the connector read the change.
	EventTimestamp bool
	// IDHeaderOnly leaves out walrelay's own headers but id, as Debezium's router
	// sets only that one; headers placed from columns (outbox.Event.Headers) follow.
	IDHeaderOnly bool
	// ExpandJSON is the router's table.expand.json.payload and its two behaviours.
	ExpandJSON ExpandJSON
	// TopicPrefix is the Debezium connector's topic.prefix, which names the schema of
	// its change event values (topic.prefix.schema.table.Value) and so the router's
	// envelope struct; envelope fields with value schemas need it.
	TopicPrefix string
	// Schemas holds the schema registry ids the registry converters (Avro,
	// Protobuf, JSON Schema) write; they need it. Copies of a Format share it.
	Schemas *Schemas
	// Native: the bytea payload already holds the value converter's encoding,
	// which is framed rather than encoded (native.go).
	Native NativePayload
}

// Validate checks the converters; schemas need the JSON converter.
func (f Format) Validate() error {
	var errs []error
	for _, c := range []struct {
		side    string
		conv    Converter
		schemas bool
	}{{"key", f.KeyConverter, f.KeySchemas}, {"value", f.ValueConverter, f.ValueSchemas}} {
		if c.conv > JSONSchema {
			errs = append(errs, errors.New(c.side+"-converter must be string, json, bytearray, avro, protobuf or json-schema"))
		}
		if c.side == "value" && f.ExpandJSON.Enabled && c.conv == ByteArray {
			errs = append(errs, errors.New("expand-json-payload needs value-converter string or json; "+
				"set value-converter string or json, or expand-json-payload false"))
		}
		if c.schemas && c.conv != JSON {
			errs = append(errs, errors.New(c.side+"-converter-schemas-enable needs "+c.side+"-converter json; "+
				"set "+c.side+"-converter: json or leave "+c.side+"-converter-schemas-enable false"))
		}
	}
	if err := f.Native.validate(&f); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Key is the record key of e: the aggregate id, converted. With the String and
// ByteArray converters it is the id's own bytes, not a copy; they must not be
// changed.
func (f *Format) Key(e *outbox.Event) []byte {
	if f.KeyConverter.Registered() {
		return f.framed(make([]byte, 0, len(e.AggregateID)+8), f.KeyConverter, false, e)
	}
	if f.KeyConverter != JSON {
		return bytesOf(e.AggregateID)
	}
	// The router's key is the aggregate id column's value with its schema
	// (EventRouterDelegate.defineRecordKeySchema); walrelay reads it as text.
	var b []byte
	if f.KeySchemas {
		b = make([]byte, 0, len(keySchemaPrefix)+len(e.AggregateID)+8)
		b = append(b, keySchemaPrefix...)
		b = appendJSONString(b, e.AggregateID)
		return append(b, '}')
	}
	b = make([]byte, 0, len(e.AggregateID)+8)
	return appendJSONString(b, e.AggregateID)
}

// keySchemaPrefix opens a JSON key with schemas: the aggregate id is a required
// string, the schema Kafka's JsonConverter.asJsonSchema writes for it (type,
// optional), ahead of the payload.
const keySchemaPrefix = `{"schema":{"type":"string","optional":false},"payload":`

// Value is the record value of e; tombstone reports a null value (a Kafka
// tombstone; other sinks mark it with a header). With the String and ByteArray
// converters it is the payload's own bytes, not a copy.
func (f *Format) Value(e *outbox.Event) (value []byte, tombstone bool) {
	if f.TombstoneOnEmpty && (e.NullPayload || blank(e.Payload)) {
		return nil, true
	}
	if f.ValueConverter.Registered() {
		if e.NullPayload && len(e.Envelope) == 0 {
			return nil, true // Confluent's serializers write a null value as null
		}
		if f.Native.Enabled {
			return f.nativeValue(e), false
		}
		return f.framed(make([]byte, 0, len(e.Payload)+len(e.Payload)/4+16), f.ValueConverter, true, e), false
	}
	if len(e.Envelope) > 0 {
		// The router's value is then a struct of the payload and the envelope
		// fields, never null (EventRouterDelegate: onlyHeadersInOutputMessage).
		return f.envelopeValue(e), false
	}
	if e.NullPayload && f.ValueConverter != JSON {
		return nil, true
	}
	if f.ExpandJSON.Enabled {
		if n, s, ok := f.expanded(e); ok {
			if f.ValueConverter == JSON {
				b := make([]byte, 0, len(e.Payload)+16)
				if f.ValueSchemas {
					b = append(b, `{"schema":`...)
					b = appendSchema(b, s, f.ExpandJSON.PayloadColumn, true)
					b = append(b, `,"payload":`...)
					return append(jsonText.append(b, n, s), '}'), false
				}
				return jsonText.append(b, n, s), false
			}
			return structText.append(make([]byte, 0, len(e.Payload)+16), n, s), false
		}
	}
	if f.ValueConverter != JSON {
		if e.Payload == nil {
			return []byte{}, false // an empty value, not a tombstone
		}
		return e.Payload, false
	}
	return f.jsonValue(e), false
}

// expanded is e's payload expanded (ExpandJSON); the router expands only a
// string, so never a bytea.
func (f *Format) expanded(e *outbox.Event) (*node, *schema, bool) {
	if !f.ExpandJSON.Enabled || e.NullPayload || e.PayloadType == "bytea" {
		return nil, nil, false
	}
	return f.ExpandJSON.expand(e.Payload)
}

// blank is Java's String.trim().isEmpty(), which the router's tombstone test uses:
// nothing but characters up to the space.
func blank(p []byte) bool {
	for _, c := range p {
		if c > ' ' {
			return false
		}
	}
	return true
}

// Timestamp is the record timestamp of e; now is the time of publishing.
func (f *Format) Timestamp(e *outbox.Event, now time.Time) time.Time {
	if f.EventTimestamp && !e.CreatedAt.IsZero() {
		return e.CreatedAt
	}
	return now
}

// bytesOf views a string's bytes without copying; the bytes must not be changed.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

func unsafeStringOf(b []byte) string { return unsafe.String(&b[0], len(b)) }
