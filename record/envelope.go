package record

import "github.com/walrelay/walrelay/outbox"

// envelopeValue is the value of an event with envelope fields (outbox.Columns.
// Envelope): the router's struct of the payload and each field under its alias
// (EventRouterDelegate.getSchemaBuilder), written by the value converter.
//
// JSON (schemas.enable=false) writes the struct as an object in field order,
// NULLs as null (JsonConverter.convertToJson); the fields are the columns' text, as
// JSON strings. With schemas the object goes inside {"schema":…,"payload":…}
// (appendEnvelopeSchema). String writes Kafka's Struct.toString: Struct{name=value,...},
// NULL fields left out. ByteArray is refused at startup: Connect's
// ByteArrayConverter refuses a struct. An expanded payload (ExpandJSON) is the
// struct it became.
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
			field("payload", structText.append(nil, n, s))
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
	n1, s1, expanded := f.expanded(e)
	if f.ValueSchemas {
		b = append(b, `{"schema":`...)
		b = f.appendEnvelopeSchema(b, e, s1)
		b = append(b, `,"payload":`...)
	}
	b = append(b, `{"payload":`...)
	plain := Format{ValueConverter: JSON} // the payload as its own field, no schema
	if expanded {
		b = jsonText.append(b, n1, s1)
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
	if f.ValueSchemas {
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendEnvelopeSchema appends the schema of the router's envelope struct as
// Kafka's JsonConverter.asJsonSchema writes it: type, fields (each field's schema
// with its name last), optional, name. The struct is required; its fields are the
// payload with the payload column's schema (or the one inferred for it, expanded)
// and each envelope column as an optional string, in placement order
// (EventRouterDelegate.getSchemaBuilder). Its name is
// the change event's value schema name, topic.prefix.schema.table.Value, with the
// event's route-by value (the aggregate type) before the last part
// (EventRouterDelegate.getSchemaName): dbserver1.public.outbox.Order.Value.
func (f *Format) appendEnvelopeSchema(b []byte, e *outbox.Event, expanded *schema) []byte {
	payload := textSchema
	switch e.PayloadType {
	case "json", "jsonb":
		payload = jsonSchema
	case "bytea":
		payload = bytesSchema
	}
	b = append(b, `{"type":"struct","fields":[`...)
	if expanded != nil {
		b = appendSchema(b, expanded, f.ExpandJSON.PayloadColumn, true)
		b = b[:len(b)-1]
	} else {
		b = append(b, payload[:len(payload)-1]...)
	}
	b = append(b, `,"field":"payload"}`...)
	for _, fl := range e.Envelope {
		b = append(b, `,{"type":"string","optional":true,"field":`...)
		b = appendJSONString(b, fl.Key)
		b = append(b, '}')
	}
	b = append(b, `],"optional":false,"name":`...)
	name := make([]byte, 0, len(f.TopicPrefix)+len(e.Table)+len(e.AggregateType)+8)
	name = append(name, f.TopicPrefix...)
	if e.Table != "" {
		name = append(append(name, '.'), e.Table...)
	}
	name = append(append(append(name, '.'), e.AggregateType...), ".Value"...)
	return append(appendJSONString(b, unsafeString(name)), '}')
}
