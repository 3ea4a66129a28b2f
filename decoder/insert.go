package decoder

import (
	"encoding/binary"
	"strconv"
	"time"
	"unsafe"

	"github.com/walrelay/walrelay/outbox"
)

// span locates one column value inside the message.
type span struct {
	kind byte // 'n', 'u', 't' or 'b'
	off  int
	n    int
}

// decodeInsert: Byte1('I') Int32 relation OID, Byte1('N'), TupleData.
func (d *Decoder) decodeInsert(data []byte, m *Message) error {
	r := reader{data: data, off: 1}
	oid, err := r.uint32("relation OID")
	if err != nil {
		return err
	}
	rel, described := d.rels[oid]
	if !described {
		return r.errorf(1, "insert into relation OID %d that no Relation message described (pgoutput sends one first)", oid)
	}
	if rel == nil {
		return nil // another table
	}
	if rel.err != nil {
		return rel.err
	}
	m.Table = rel.t.index
	tagOff := r.off
	tag, err := r.uint8("tuple tag")
	if err != nil {
		return err
	}
	if tag != 'N' {
		return r.errorf(tagOff, "tuple tag is %s, want 'N' (new tuple)", msgTypeName(tag))
	}
	if len(rel.placedPos) > 0 && cap(d.tuple) < rel.ncols {
		d.tuple = make([]span, rel.ncols)
	}
	tuple := d.tuple[:0]
	if len(rel.placedPos) > 0 {
		tuple = d.tuple[:rel.ncols]
	}
	spans, err := readTuple(&r, rel, tuple)
	if err != nil {
		return err
	}
	if err := r.end(); err != nil {
		return err
	}
	if ra := spans[fieldRetryAfter].kind; ra == 't' || ra == 'b' {
		// The poller's row, usually walrelay's re-insert of a failed event whose
		// row the application deleted: the poller publishes it after its backoff.
		m.Kind = KindHandedOver
		m.Table = rel.t.index
		return nil
	}
	if err := d.fill(data, rel, &spans, tuple, &m.Event); err != nil {
		m.Event = outbox.Event{}
		m.Table = rel.t.index
		return err
	}
	m.Kind = KindInsert
	m.Table = rel.t.index
	return nil
}

// readTuple walks TupleData: Int16 column count, then per column Byte1 kind
// ('n' NULL, 'u' unchanged TOAST, 't' text or 'b' binary, the last two
// followed by Int32 length and the bytes). It records where the outbox
// columns are without copying anything; tuple, when not empty, gets every
// column's span.
func readTuple(r *reader, rel *relation, tuple []span) (spans [numColumns]span, err error) {
	countOff := r.off
	n, err := r.int16("tuple column count")
	if err != nil {
		return spans, err
	}
	if int(n) != rel.ncols {
		return spans, r.errorf(countOff, "tuple has %d columns but the Relation message for it has %d", n, rel.ncols)
	}
	data := r.data
	off := r.off
	for i := range rel.ncols {
		if off >= len(data) {
			return spans, r.errorf(off, "tuple column %d kind (1 byte) runs past end of message (%d bytes)", i+1, len(data))
		}
		s := span{kind: data[off]}
		off++
		switch s.kind {
		case 'n', 'u':
		case 't', 'b':
			if len(data)-off < 4 {
				return spans, r.errorf(off, "tuple column %d length (4 bytes) runs past end of message (%d bytes)", i+1, len(data))
			}
			l := int32(binary.BigEndian.Uint32(data[off:]))
			if l < 0 {
				return spans, r.errorf(off, "tuple column %d has negative length %d", i+1, l)
			}
			if int(l) > len(data)-off-4 {
				return spans, r.errorf(off, "tuple column %d length %d runs past end of message (%d bytes)", i+1, l, len(data))
			}
			s.off, s.n = off+4, int(l)
			off += 4 + int(l)
		default:
			return spans, r.errorf(off-1, "tuple column %d has unknown kind %s, want 'n', 'u', 't' or 'b'", i+1, msgTypeName(s.kind))
		}
		if f := rel.field[i]; f >= 0 {
			spans[f] = s
		}
		if len(tuple) > 0 {
			tuple[i] = s
		}
	}
	for _, sh := range rel.shared {
		spans[sh[1]] = spans[sh[0]]
	}
	r.off = off
	return spans, nil
}

// fill checks the outbox columns and copies them into ev. All string bytes
// go into one piece of the decoder's current slab, so ev shares nothing with
// data and an insert costs no allocation of its own (headers cost their slice).
func (d *Decoder) fill(data []byte, rel *relation, spans *[numColumns]span, tuple []span, ev *outbox.Event) error {
	for f := range numFields {
		if rel.t.names[f] == "" {
			continue // no such column (created_at)
		}
		switch spans[f].kind {
		case 'n':
			if f == fieldPayload {
				continue // published as a null value (a tombstone)
			}
			return rel.rowError(data, spans, f, "is NULL")
		case 'u':
			return rel.rowError(data, spans, f, "is an unchanged TOAST value, which an insert never carries")
		}
	}
	var createdAt time.Time
	if rel.t.names[fieldCreatedAt] != "" {
		ts := spans[fieldCreatedAt]
		var ok bool
		if createdAt, ok = parseTimestamp(data[ts.off:ts.off+ts.n], !rel.createdAtLocal); !ok {
			want := "a finite timestamptz in ISO format (like 2006-01-02 15:04:05.999999+00)"
			if rel.createdAtLocal {
				want = "a finite timestamp in ISO format (like 2006-01-02 15:04:05.999999)"
			}
			return rel.rowError(data, spans, fieldCreatedAt, "value "+quoteValue(data[ts.off:ts.off+ts.n])+" is not "+want)
		}
	}
	nullPayload := spans[fieldPayload].kind == 'n'
	payload := data[spans[fieldPayload].off : spans[fieldPayload].off+spans[fieldPayload].n]
	payloadLen := len(payload)
	if rel.payloadBytea && !nullPayload {
		// pgoutput sends bytea in its text form, \x and two hex digits a byte
		// (bytea_output = hex, which the replication connection sets).
		if len(payload) < 2 || payload[0] != '\\' || payload[1] != 'x' || len(payload)%2 != 0 {
			return rel.rowError(data, spans, fieldPayload, "bytea value is not in hex format (\\x...); set bytea_output = hex")
		}
		payloadLen = (len(payload) - 2) / 2
	}

	total := payloadLen
	for f := range fieldPayload {
		total += spans[f].n
	}
	for _, pos := range rel.placedPos {
		if pos >= 0 {
			total += tuple[pos].n // NULL and unchanged values have n 0
		}
	}
	buf := d.carve(total)
	off := 0
	take := func(s span) (int, int) {
		start := off
		off += copy(buf[off:], data[s.off:s.off+s.n])
		return start, off
	}
	str := func(s span) string {
		start, end := take(s)
		if start == end {
			return ""
		}
		return unsafe.String(&buf[start], end-start)
	}
	*ev = outbox.Event{
		ID:            str(spans[fieldID]),
		AggregateType: str(spans[fieldAggregateType]),
		AggregateID:   str(spans[fieldAggregateID]),
		EventType:     str(spans[fieldEventType]),
		CreatedAt:     createdAt,
		PayloadType:   rel.payloadType,
	}
	if len(rel.placedPos) > 0 {
		fillPlaced(rel, tuple, ev, str)
	}
	if nullPayload {
		ev.NullPayload = true
		return nil
	}
	if !rel.payloadBytea {
		start, end := take(spans[fieldPayload])
		ev.Payload = buf[start:end:end]
		return nil
	}
	out := buf[off : off+payloadLen : off+payloadLen]
	for i := range out {
		hi, ok1 := unhex(payload[2+2*i])
		lo, ok2 := unhex(payload[3+2*i])
		if !ok1 || !ok2 {
			return rel.rowError(data, spans, fieldPayload, "bytea value has a character that is not a hex digit")
		}
		out[i] = hi<<4 | lo
	}
	ev.Payload = out
	return nil
}

// fillPlaced sets ev's headers, partition and trace headers from the placed
// columns, their text copied by str. A NULL header column is a header marked Null.
func fillPlaced(rel *relation, tuple []span, ev *outbox.Event, str func(span) string) {
	var hs []outbox.Header // allocated with the first header
	for k, pc := range rel.t.placed {
		pos := rel.placedPos[k]
		if pos < 0 {
			continue
		}
		s := tuple[pos]
		if pc.kind == placedEnvelope {
			if ev.Envelope == nil {
				ev.Envelope = make([]outbox.Field, 0, len(rel.t.placed)-k)
			}
			f := outbox.Field{Key: pc.header, Null: s.kind != 't' && s.kind != 'b'}
			if !f.Null {
				f.Value = str(s)
			}
			ev.Envelope = append(ev.Envelope, f)
			continue
		}
		if s.kind != 't' && s.kind != 'b' {
			if pc.kind == placedHeader { // a NULL header: only some records write it
				if hs == nil {
					hs = make([]outbox.Header, 0, rel.t.maxHeaders)
				}
				hs = append(hs, outbox.Header{Key: pc.header, Type: rel.placedType[k], Null: true})
			}
			continue // NULL: no partition, no trace
		}
		v := str(s)
		if hs == nil && pc.kind != placedPartition {
			hs = make([]outbox.Header, 0, rel.t.maxHeaders)
		}
		switch pc.kind {
		case placedHeader:
			hs = append(hs, outbox.Header{Key: pc.header, Value: v, Type: rel.placedType[k]})
		case placedPartition:
			ev.Partition = v
		case placedTrace:
			hs = outbox.AppendTraceHeaders(hs, v)
		}
	}
	if len(hs) > 0 {
		ev.Headers = hs
	}
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// rowError reports field f of the row, naming the row by its id when that
// column could be read.
func (rel *relation) rowError(data []byte, spans *[numColumns]span, f int, reason string) *RowError {
	e := &RowError{Table: rel.t.qualified, Column: rel.t.names[f], Reason: reason}
	switch id := spans[fieldID]; id.kind {
	case 't', 'b':
		e.ID = string(data[id.off : id.off+id.n])
	case 'n':
		e.NullID = true
	}
	return e
}

// quoteValue quotes a column value for an error message, cut to a length a
// log line can carry.
func quoteValue(b []byte) string {
	const max = 64
	if len(b) > max {
		return strconv.Quote(string(b[:max])) + "..."
	}
	return strconv.Quote(string(b))
}

// slabSize is the unit events are carved from: one allocation serves a few hundred
// typical events, and a slab is freed by the garbage collector once none of its
// events is referenced.
const slabSize = 64 << 10

// carve returns n bytes no other event uses.
func (d *Decoder) carve(n int) []byte {
	if n > slabSize/4 {
		return make([]byte, n) // large events get their own memory
	}
	if len(d.slab)+n > cap(d.slab) {
		d.slab = make([]byte, 0, slabSize)
	}
	start := len(d.slab)
	d.slab = d.slab[:start+n]
	return d.slab[start : start+n : start+n]
}
