package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/walrelay/walrelay/outbox"
)

// A native payload is a bytea payload that already holds the value converter's
// encoding: Avro binary or a Protobuf message, written by the service itself.
// walrelay does not re-encode it; it frames it for the registry (magic byte, the
// schema's id, for Protobuf the message indexes) with a schema the registry
// already holds, fetched once per subject or id (docs/design.md, "Schema
// registry"). Before framing it checks the bytes against that schema without
// decoding them into values (nativecheck.go): Avro must be well formed for the
// writer schema, Protobuf well formed wire format whose known fields have their
// declared wire types, for a message the schema declares. A payload that fails is
// a dead letter with the reason. A payload a registry serializer already framed
// with the schema's id passes through as it is (nativeframed.go).

// NativePayload says how to find a native payload's schema.
type NativePayload struct {
	// Enabled: the value converter (avro or protobuf) frames the bytea payload
	// rather than encoding it.
	Enabled bool
	// Subject is the template of the subject whose latest version is the payload's
	// schema: {topic}, {event_type}, {aggregate_type}. Empty: {topic}-value.
	Subject string
	// IDHeader, when set, is the key of a header placed from a column
	// (column-headers) holding the schema's registry id; the schema is then the
	// one with that id, and Subject is not used.
	IDHeader string
	// Message is the Protobuf message's full name, a template with {event_type}
	// and {aggregate_type}; empty: the schema's first message.
	Message string
	// MessageHeader, when set, is the key of a header placed from a column holding
	// the Protobuf message's full name; it wins over Message.
	MessageHeader string
	// Framed is whether the service frames payloads itself: detected per
	// payload (nativeschema.go, classify), never or always.
	Framed Framing
}

// Framing is whether native payloads come framed by a registry serializer.
type Framing uint8

const (
	// FramedDetect takes a payload for framed when its first bytes are the
	// magic byte and the schema's id and the rest is well formed; one that reads
	// both ways is refused.
	FramedDetect Framing = iota
	// FramedNever frames every payload, whatever its first bytes.
	FramedNever
	// FramedAlways passes every payload as it is, and refuses one not framed
	// with the schema's id.
	FramedAlways
)

// ParseFraming reads detect, never or always.
func ParseFraming(s string) (Framing, error) {
	switch s {
	case "", "detect":
		return FramedDetect, nil
	case "never":
		return FramedNever, nil
	case "always":
		return FramedAlways, nil
	}
	return 0, fmt.Errorf("native-payload-framed %q is not detect, never or always", s)
}

func (m Framing) String() string {
	switch m {
	case FramedNever:
		return "never"
	case FramedAlways:
		return "always"
	}
	return "detect"
}

// DefaultNativeSubject is the subject template when none is set: the topic
// name strategy's value subject.
const DefaultNativeSubject = "{topic}-value"

// nativePlaceholders are what a subject template may name; a message template
// has no {topic}.
var nativePlaceholders = []string{"{topic}", "{event_type}", "{aggregate_type}"}

// validate checks the templates and what f writes beside them.
func (n NativePayload) validate(f *Format) error {
	if !n.Enabled {
		return nil
	}
	c := f.ValueConverter
	var errs []error
	if f.ExpandJSON.Enabled {
		errs = append(errs, errors.New("native-payload and expand-json-payload: a native payload is bytes, never expanded; set one of them"))
	}
	if c != Avro && c != Protobuf {
		errs = append(errs, fmt.Errorf("native-payload needs value-converter avro or protobuf (the payload's encoding), "+
			"and it is %s; set value-converter to the encoding the service writes", c))
	}
	if err := checkTemplate("native-payload-subject", n.Subject, nativePlaceholders); err != nil {
		errs = append(errs, err)
	}
	if err := checkTemplate("native-payload-message", n.Message, nativePlaceholders[1:]); err != nil {
		errs = append(errs, err)
	}
	if c != Protobuf && (n.Message != "" || n.MessageHeader != "") {
		errs = append(errs, errors.New("native-payload-message and native-payload-message-header name a Protobuf "+
			"message; leave them empty with value-converter avro"))
	}
	return errors.Join(errs...)
}

// checkTemplate refuses a placeholder not among known.
func checkTemplate(setting, t string, known []string) error {
	for rest := t; ; {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			return nil
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return fmt.Errorf("%s %q has a { without its }", setting, t)
		}
		p := rest[i : i+j+1]
		found := false
		for _, k := range known {
			found = found || p == k
		}
		if !found {
			return fmt.Errorf("%s %q names %s; it may name %s", setting, t, p, strings.Join(known, ", "))
		}
		rest = rest[i+j+1:]
	}
}

// render appends template t with e's values to b.
func render(b []byte, t string, e *outbox.Event, topic func(*outbox.Event) string) []byte {
	for {
		i := strings.IndexByte(t, '{')
		if i < 0 {
			return append(b, t...)
		}
		b = append(b, t[:i]...)
		t = t[i:]
		switch {
		case strings.HasPrefix(t, "{topic}"):
			b, t = append(b, topic(e)...), t[len("{topic}"):]
		case strings.HasPrefix(t, "{event_type}"):
			b, t = append(b, e.EventType...), t[len("{event_type}"):]
		case strings.HasPrefix(t, "{aggregate_type}"):
			b, t = append(b, e.AggregateType...), t[len("{aggregate_type}"):]
		default:
			b, t = append(b, '{'), t[1:]
		}
	}
}

// header is the value of e's header key.
func header(e *outbox.Event, key string) (string, bool) {
	for _, h := range e.Headers {
		if h.Key == key && !h.Null {
			return h.Value, true
		}
	}
	return "", false
}

// nativeRef is where e's payload schema is found: key, appended to buf, is the
// subject, or # and the id when a header names it (id > 0); it is the cache's key.
func (f *Format) nativeRef(e *outbox.Event, buf []byte) (id int32, key []byte, err error) {
	n := f.Native
	if n.IDHeader != "" {
		v, ok := header(e, n.IDHeader)
		if !ok {
			return 0, buf, fmt.Errorf("native payload: the event has no %s header with its schema id "+
				"(native-payload-id-header); place the id's column with column-headers", n.IDHeader)
		}
		i, perr := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if perr != nil || i <= 0 {
			return 0, buf, fmt.Errorf("native payload: header %s is %q, not a schema id (a positive integer)", n.IDHeader, v)
		}
		buf = strconv.AppendInt(append(buf, '#'), i, 10)
		return int32(i), buf, nil
	}
	t := n.Subject
	if t == "" {
		t = DefaultNativeSubject
	}
	return 0, render(buf, t, e, f.Schemas.Topic), nil
}

// nativeMessageName is the Protobuf message e's payload is, "" for the schema's
// first.
func (f *Format) nativeMessageName(e *outbox.Event, buf []byte) []byte {
	if f.Native.MessageHeader != "" {
		if v, ok := header(e, f.Native.MessageHeader); ok {
			return append(buf, v...)
		}
	}
	return render(buf, f.Native.Message, e, nil)
}

// nativeNeeds appends the schema e's native payload needs when not cached, or
// says why the payload cannot be written.
func (f *Format) nativeNeeds(e *outbox.Event, dst []SchemaNeed) ([]SchemaNeed, error) {
	if e.PayloadType != "bytea" {
		return dst, &UnwritableError{Err: fmt.Errorf("native payload: the payload column is %s, not bytea; "+
			"native-payload reads Avro or Protobuf bytes from a bytea payload column", payloadTypeName(e))}
	}
	var kb [128]byte
	id, key, err := f.nativeRef(e, kb[:0])
	if err != nil {
		return dst, &UnwritableError{Err: err}
	}
	ns := f.Schemas.native(key)
	if ns == nil {
		var subject string
		if id == 0 {
			subject = string(key)
		}
		typ := SchemaAvro
		if f.ValueConverter == Protobuf {
			typ = SchemaProtobuf
		}
		return append(dst, SchemaNeed{Subject: subject, Schema: string(key), Type: typ, Value: true, Native: true, ID: id}), nil
	}
	var mb [128]byte
	if _, _, err := ns.classify(e.Payload, f.nativeMessageName(e, mb[:0]), f.Native.Framed); err != nil {
		return dst, &UnwritableError{Err: err}
	}
	return dst, nil
}

func payloadTypeName(e *outbox.Event) string {
	if e.PayloadType == "" {
		return "text"
	}
	return e.PayloadType
}

// nativeValue is e's native payload framed, or as it is when already framed. A
// payload Needs did not pass (which the relay never publishes) is framed with id
// 0, which no registry gives, and counted in Misses, so that consumers fail on it
// rather than read it with a wrong schema.
func (f *Format) nativeValue(e *outbox.Event) []byte {
	var kb, mb [128]byte
	var ns *nativeSchema
	if f.Schemas != nil {
		if _, key, err := f.nativeRef(e, kb[:0]); err == nil {
			ns = f.Schemas.native(key)
		}
	}
	if ns == nil {
		return f.unframed(e)
	}
	pre, indexes, err := ns.classify(e.Payload, f.nativeMessageName(e, mb[:0]), f.Native.Framed)
	if err != nil {
		return f.unframed(e)
	}
	if pre {
		return e.Payload
	}
	b := make([]byte, 0, len(e.Payload)+5+len(indexes))
	b = binary.BigEndian.AppendUint32(append(b, 0), uint32(ns.id))
	return append(append(b, indexes...), e.Payload...)
}

// unframed is e's payload behind id 0, counted in Misses.
func (f *Format) unframed(e *outbox.Event) []byte {
	if f.Schemas != nil {
		f.Schemas.misses.Add(1)
	}
	b := binary.BigEndian.AppendUint32(append(make([]byte, 0, len(e.Payload)+5), 0), 0)
	return append(b, e.Payload...)
}
