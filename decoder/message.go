package decoder

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/outbox"
)

// DecodeMessages makes d decode logical decoding messages with prefix as table-less
// outbox events (outbox.Emit): KindMessage for a transactional one whose content
// is an event, a *MessageError for one whose content is not, KindOutsideMessage for
// a non-transactional one. Messages with other prefixes stay KindSkip. The server
// sends messages only when replication started with messages 'true'.
func (d *Decoder) DecodeMessages(prefix string) {
	d.messages, d.prefix = true, prefix
}

// MessageError reports a transactional logical message with the decoder's prefix
// whose content is not an outbox event (outbox.UnmarshalMessage), or names an
// outbox table the decoder does not read. The stream is fine and decoding can
// continue; the message itself will never be publishable.
type MessageError struct {
	LSN     pglogrepl.LSN // of the message
	Prefix  string
	Content []byte // a copy
	Err     error  // why: an *outbox.MessageError, or the unknown table
}

func (e *MessageError) Error() string {
	return fmt.Sprintf("logical message at %s with prefix %q is not an outbox event: %v", e.LSN, e.Prefix, e.Err)
}

func (e *MessageError) Unwrap() error { return e.Err }

// decodeMessage: Byte1('M') Int8 flags (1: transactional), Int64 LSN, String prefix,
// Int32 content length, Byte(n) content.
func (d *Decoder) decodeMessage(data []byte, m *Message) error {
	if !d.messages {
		return nil
	}
	r := reader{data: data, off: 1}
	flags, err := r.uint8("flags")
	if err != nil {
		return err
	}
	lsn, err := r.uint64("message LSN")
	if err != nil {
		return err
	}
	prefix, err := r.cstring("prefix")
	if err != nil {
		return err
	}
	lenOff := r.off
	n, err := r.uint32("content length")
	if err != nil {
		return err
	}
	if int64(n) != int64(r.left()) {
		return r.errorf(lenOff, "content length %d does not match the %d bytes left in the message", n, r.left())
	}
	if string(prefix) != d.prefix {
		return nil // another application's message, or the relay's heartbeat
	}
	if flags&1 == 0 {
		m.Kind = KindOutsideMessage
		return nil
	}
	content := data[r.off:]
	ev, table, err := outbox.UnmarshalMessage(content)
	idx := 0
	if err == nil && table != "" {
		if idx = d.tableIndex(table); idx < 0 {
			err = fmt.Errorf("it names outbox table %s, which this relay does not stream; "+
				"set the emitter's Table to one of the relay's tables", table)
		}
	}
	if err != nil {
		m.Table = max(idx, 0)
		return &MessageError{LSN: pglogrepl.LSN(lsn), Prefix: d.prefix, Content: bytes.Clone(content), Err: err}
	}
	m.Kind = KindMessage
	m.Event = ev
	m.Table = idx
	return nil
}

// tableIndex finds a table by name or schema.name (public when none), or -1.
func (d *Decoder) tableIndex(name string) int {
	schema, table, ok := strings.Cut(name, ".")
	if !ok {
		schema, table = "public", name
	}
	for _, t := range d.tables {
		if t.schema == schema && t.table == table {
			return t.index
		}
	}
	return -1
}
