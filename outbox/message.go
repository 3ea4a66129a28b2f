package outbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"
)

// The content of a table-less outbox event, the logical message Emit writes, is
// small and binary so that it costs the WAL little more than the event's own bytes:
//
//	byte     'W'                      marks walrelay's encoding
//	byte     version                  1
//	string   id                       the deduplication id, a UUID
//	string   aggregate type
//	string   aggregate id
//	string   event type
//	string   table                    outbox table for a hand-over; empty: the relay's first
//	varint   created at               microseconds since the Unix epoch, UTC
//	uvarint  header count, then each header as string key, string value
//	string   payload                  the bytes as given, never re-encoded
//
// A string is a uvarint byte length and the bytes. Nothing may follow the payload.
// A later version changes the version byte; a relay rejects versions it does not
// know, so the message becomes a dead letter rather than a wrong event.
const (
	messageMagic   = 'W'
	messageVersion = 1
)

// MarshalMessage encodes e as the content of a table-less outbox event. table names
// the outbox table the relay inserts e into when it cannot be published (empty: the
// relay's first table). e must be valid (see Emit); MarshalMessage does not check it.
func MarshalMessage(e *Event, table string) []byte {
	n := 2 + 6*binary.MaxVarintLen64 + len(e.ID) + len(e.AggregateType) + len(e.AggregateID) +
		len(e.EventType) + len(table) + len(e.Payload) + binary.MaxVarintLen64
	for _, h := range e.Headers {
		n += 2*binary.MaxVarintLen64 + len(h.Key) + len(h.Value)
	}
	b := make([]byte, 0, n)
	b = append(b, messageMagic, messageVersion)
	for _, s := range []string{e.ID, e.AggregateType, e.AggregateID, e.EventType, table} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendVarint(b, e.CreatedAt.UnixMicro())
	b = binary.AppendUvarint(b, uint64(len(e.Headers)))
	for _, h := range e.Headers {
		b = binary.AppendUvarint(b, uint64(len(h.Key)))
		b = append(b, h.Key...)
		b = binary.AppendUvarint(b, uint64(len(h.Value)))
		b = append(b, h.Value...)
	}
	b = binary.AppendUvarint(b, uint64(len(e.Payload)))
	return append(b, e.Payload...)
}

// MessageError says why a logical message is not a table-less outbox event.
type MessageError struct {
	Offset int    // byte offset in the content
	Reason string // what is wrong, in words
}

func (e *MessageError) Error() string {
	return fmt.Sprintf("outbox message content at byte %d: %s", e.Offset, e.Reason)
}

// UnmarshalMessage decodes content written by MarshalMessage into an event and the
// table it names. Nothing in the event aliases content: its strings and payload share
// one copy of it, so decoding costs one allocation (two with headers). Errors are
// *MessageError.
func UnmarshalMessage(content []byte) (Event, string, error) {
	if len(content) < 2 || content[0] != messageMagic {
		return Event{}, "", &MessageError{Reason: "does not start with walrelay's marker 'W'; write it with outbox.Emit"}
	}
	if content[1] != messageVersion {
		return Event{}, "", &MessageError{Offset: 1, Reason: fmt.Sprintf("encoding version %d is not one this relay reads (%d); upgrade the relay", content[1], messageVersion)}
	}
	m := messageReader{b: bytes.Clone(content), off: 2}
	var e Event
	e.ID = m.str("id")
	e.AggregateType = m.str("aggregate type")
	e.AggregateID = m.str("aggregate id")
	e.EventType = m.str("event type")
	table := m.str("table")
	us := m.varint("created at")
	if m.err == nil {
		e.CreatedAt = time.UnixMicro(us).UTC()
	}
	count := m.uvarint("header count")
	if m.err == nil && count > uint64(len(content)-m.off)/2 {
		m.fail("header count %d is more than the content can hold", count)
	}
	if m.err == nil && count > 0 {
		e.Headers = make([]Header, count)
		for i := range e.Headers {
			e.Headers[i] = Header{Key: m.str("header key"), Value: m.str("header value")}
		}
	}
	e.Payload = m.bytes("payload")
	if m.err == nil && m.off != len(content) {
		m.fail("%d unexpected bytes after the payload", len(content)-m.off)
	}
	if m.err == nil {
		m.err = check(&e, m.off)
	}
	if m.err != nil {
		return Event{}, "", m.err
	}
	return e, table, nil
}

// check applies Emit's rules to a decoded event.
func check(e *Event, off int) error {
	if err := validate(e); err != nil {
		return &MessageError{Offset: off, Reason: err.Error()}
	}
	if !isUUID(e.ID) {
		return &MessageError{Offset: off, Reason: fmt.Sprintf("id %q is not a UUID", e.ID)}
	}
	return nil
}

// messageReader walks message content; the first error sticks.
type messageReader struct {
	b   []byte
	off int
	err error
}

func (m *messageReader) fail(format string, args ...any) {
	if m.err == nil {
		m.err = &MessageError{Offset: m.off, Reason: fmt.Sprintf(format, args...)}
	}
}

func (m *messageReader) uvarint(what string) uint64 {
	if m.err != nil {
		return 0
	}
	v, n := binary.Uvarint(m.b[m.off:])
	if n <= 0 {
		m.fail("%s is not a valid uvarint or runs past the end (%d bytes)", what, len(m.b))
		return 0
	}
	m.off += n
	return v
}

func (m *messageReader) varint(what string) int64 {
	if m.err != nil {
		return 0
	}
	v, n := binary.Varint(m.b[m.off:])
	if n <= 0 {
		m.fail("%s is not a valid varint or runs past the end (%d bytes)", what, len(m.b))
		return 0
	}
	m.off += n
	return v
}

func (m *messageReader) bytes(what string) []byte {
	if m.err != nil {
		return nil
	}
	l := m.uvarint(what + " length")
	if m.err != nil {
		return nil
	}
	if l > uint64(len(m.b)-m.off) {
		m.fail("%s length %d runs past the end (%d bytes)", what, l, len(m.b))
		return nil
	}
	v := m.b[m.off : m.off+int(l) : m.off+int(l)]
	m.off += int(l)
	return v
}

// str is bytes as a string sharing the reader's copy of the content.
func (m *messageReader) str(what string) string {
	v := m.bytes(what)
	if len(v) == 0 {
		return ""
	}
	return unsafe.String(&v[0], len(v))
}

// errInvalid is the rule Write and Emit share.
var errInvalid = errors.New("outbox event needs AggregateType, AggregateID and EventType")

// validate checks what every outbox event needs.
func validate(e *Event) error {
	if e.AggregateType == "" || e.AggregateID == "" || e.EventType == "" {
		return errInvalid
	}
	if len(e.Payload) == 0 {
		return errors.New("outbox event needs a Payload (JSON for Write)")
	}
	return nil
}

// isUUID reports whether s is a UUID in its canonical text form.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := range len(s) {
		switch c := s[i]; {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
		default:
			return false
		}
	}
	return true
}
