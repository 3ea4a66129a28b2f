package decoder

import (
	"fmt"
	"strconv"
)

// DecodeError reports bytes that are not a well-formed pgoutput protocol
// version 1 message: empty or truncated input, a length that runs past the
// end, an unknown or unexpected message type, or an Insert for a relation no
// Relation message described. It means the stream itself is wrong (or was
// started with options walrelay does not request); retrying the same bytes
// gives the same error.
type DecodeError struct {
	MsgType byte   // the message's first byte; 0 for empty input
	Offset  int    // byte offset in the message where the problem was found
	Reason  string // what is wrong, in words
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("decode pgoutput %s message at byte %d: %s", msgTypeName(e.MsgType), e.Offset, e.Reason)
}

// msgTypeName renders a message type byte for people: 'I' when printable,
// 0x00 otherwise.
func msgTypeName(t byte) string {
	if t > ' ' && t < 0x7f {
		return strconv.QuoteRune(rune(t))
	}
	return fmt.Sprintf("0x%02x", t)
}

// SchemaError reports that the outbox table, as described by a Relation
// message, lacks a column the relay needs. Every later Insert into that
// relation returns the same error until a Relation message with the column
// arrives. The fix is on the database side, so the relay should stop and
// tell the operator.
type SchemaError struct {
	Table  string // schema-qualified table, e.g. "public.outbox_events"
	Column string // the first required column that is missing
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("outbox table %s has no column %q; run walrelay migrate or add the column", e.Table, e.Column)
}

// RowError reports an outbox row that was decoded correctly but cannot become
// an event: a required column is NULL or an unchanged TOAST value, or
// created_at is not a finite timestamp. The stream is fine and decoding can
// continue with the next message; the row itself will never be publishable.
type RowError struct {
	Table  string // schema-qualified table, e.g. "public.outbox_events"
	ID     string // the row's id when it could be read, "" otherwise
	NullID bool   // the id column is NULL (an adopted table may allow it)
	Column string // the offending column
	Reason string // e.g. "is NULL"
}

func (e *RowError) Error() string {
	if e.ID == "" {
		return fmt.Sprintf("outbox row in %s: column %s %s", e.Table, e.Column, e.Reason)
	}
	return fmt.Sprintf("outbox row %q in %s: column %s %s", e.ID, e.Table, e.Column, e.Reason)
}
