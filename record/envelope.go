package record

import "github.com/walrelay/walrelay/outbox"

// envelopeValue is the value of an event with envelope fields (outbox.Columns.
// Envelope): the router's struct of the payload and each field under its alias
// (EventRouterDelegate.getSchemaBuilder), written by the value converter.
//
// JSON (schemas.enable=false) writes the struct as an object in field order,
// NULLs as null (JsonConverter.convertToJson); the fields are the columns' text, as
// JSON strings. String writes Kafka's Struct.toString: Struct{name=value,...},
// NULL fields left out. Schemas and ByteArray are refused at startup: the struct's
// schema name needs the connector's topic prefix, and Connect's ByteArrayConverter
// refuses a struct. An expanded payload (ExpandJSON) is the struct it became.
func (f *Format) envelopeValue(e *outbox.Event) []byte {
	n := len(e.Payload) + len(e.Payload)/8 + 32
	for _, fl := range e.Envelope {
		n += len(fl.Key) + len(fl.Value) + 8
	}
	b := make([]byte, 0, n)
	if f.ValueConverter != JSON {
		b = append(b, "Struct{"...)
		first := true
		field := func(k string, v []byte) {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, k...)
			b = append(b, '=')
			b = append(b, v...)
		}
		if n, s, ok := f.expanded(e); ok {
			field("payload", appendStruct(nil, n, s))
		} else if !e.NullPayload {
			field("payload", e.Payload)
		}
		for _, fl := range e.Envelope {
			if !fl.Null {
				field(fl.Key, bytesOf(fl.Value))
			}
		}
		return append(b, '}')
	}
	b = append(b, `{"payload":`...)
	plain := Format{ValueConverter: JSON} // the payload as its own field, no schema
	if n, s, ok := f.expanded(e); ok {
		b = appendJSON(b, n, s)
	} else {
		b = append(b, plain.jsonValue(e)...)
	}
	for _, fl := range e.Envelope {
		b = append(b, ',')
		b = appendJSONString(b, fl.Key)
		b = append(b, ':')
		if fl.Null {
			b = append(b, "null"...)
		} else {
			b = appendJSONString(b, fl.Value)
		}
	}
	return append(b, '}')
}
