package decoder

import (
	"strconv"

	"github.com/walrelay/walrelay/outbox"
)

// Fields of outbox.Event, in the order errors report them: the required columns.
const (
	fieldID = iota
	fieldAggregateType
	fieldAggregateID
	fieldEventType
	fieldPayload
	fieldCreatedAt
	numFields
)

// Optional columns the decoder reads when the table has them.
const (
	// fieldRetryAfter is set only on rows handed over to the poller; see
	// KindHandedOver.
	fieldRetryAfter = numFields + iota
	numColumns
)

// columnNames maps outbox.Columns to the table's column names, indexed by field.
// An empty name is a column the table does not have (only created_at may be
// missing: the commit time stands in for it).
func columnNames(c outbox.Columns) [numColumns]string {
	return [numColumns]string{
		fieldID:            c.ID,
		fieldAggregateType: c.AggregateType,
		fieldAggregateID:   c.AggregateID,
		fieldEventType:     c.EventType,
		fieldPayload:       c.Payload,
		fieldCreatedAt:     c.CreatedAt,
		fieldRetryAfter:    "retry_after", // bookkeeping columns keep their names
	}
}

// fieldsOf lists the fields column name fills, in field order, appended to fs:
// one column may fill several (Debezium's router routes by any column, also the
// type or the key column).
func (t *target) fieldsOf(fs []int8, name []byte) []int8 {
	for f, c := range t.names {
		if c != "" && string(name) == c {
			fs = append(fs, int8(f))
		}
	}
	return fs
}

// Type OIDs that change how a column's text is read.
const (
	oidBytea       = 17
	oidJSON        = 114
	oidJSONB       = 3802
	oidTimestamp   = 1114 // without time zone: read as UTC
	oidTimestamptz = 1184
	oidBool        = 16
	oidDate        = 1082
	oidNumeric     = 1700
)

// formatType names the types outbox.Header.Type distinguishes as PostgreSQL's
// format_type does; "" for the others, whose text a record writes as it is.
func formatType(oid uint32, typmod int32) string {
	switch oid {
	case oidBool:
		return "boolean"
	case oidDate:
		return "date"
	case oidNumeric:
		if typmod >= 4 { // (precision << 16 | scale) + 4
			t := typmod - 4
			return "numeric(" + strconv.Itoa(int(t>>16&0xffff)) + "," + strconv.Itoa(int(t&0xffff)) + ")"
		}
		return "numeric"
	case oidTimestamp, oidTimestamptz:
		zone := " without time zone"
		if oid == oidTimestamptz {
			zone = " with time zone"
		}
		if typmod >= 0 {
			return "timestamp(" + strconv.Itoa(int(typmod)) + ")" + zone
		}
		return "timestamp" + zone
	}
	return ""
}

// placed is a column read besides the event's own (outbox.Columns.Placed).
type placed struct {
	column string
	header string // the header's key, for a header column
	kind   placedKind
}

type placedKind uint8

const (
	placedHeader placedKind = iota
	placedPartition
	placedTrace // optional: the table may lack it
	placedEnvelope
)

// placedOf lists c's placed columns in outbox.Columns.Placed order.
func placedOf(c outbox.Columns) []placed {
	var out []placed
	for _, h := range c.Headers {
		out = append(out, placed{column: h.Column, header: h.Key(), kind: placedHeader})
	}
	if c.Partition != "" {
		out = append(out, placed{column: c.Partition, kind: placedPartition})
	}
	if c.Trace != "" {
		out = append(out, placed{column: c.Trace, kind: placedTrace})
	}
	for _, f := range c.Envelope {
		out = append(out, placed{column: f.Column, header: f.Key(), kind: placedEnvelope})
	}
	return out
}

// maxHeaders is how many headers placed columns make at most: one per header
// column, two (traceparent, tracestate) for the trace column.
func maxHeaders(placed []placed) int {
	n := 0
	for _, pc := range placed {
		switch pc.kind {
		case placedHeader:
			n++
		case placedTrace:
			n += 2
		}
	}
	return n
}

// relation is the cached layout of an outbox table.
type relation struct {
	t     *target // the configured table it is
	ncols int
	// field maps a tuple column position to a field, or -1 for columns the
	// relay ignores.
	field []int8
	// shared are the fields filled by a column that fills an earlier field too,
	// each beside that field: {first, also}.
	shared [][2]int8
	// placedPos is the tuple position of each of t.placed, -1 when the table
	// lacks it (only the trace column may be missing).
	placedPos []int
	// placedType is the type of each of t.placed as format_type names it, for
	// the types a record format writes differently (outbox.Header.Type); "" others.
	placedType []string
	// err is set when the table lacks a required column; inserts return it.
	err *SchemaError
	// payloadBytea: the payload arrives as bytea's hex text (\x...) and is decoded.
	payloadBytea bool
	// payloadType is the payload column's type as outbox.Event.PayloadType names it.
	payloadType string
	// createdAtLocal: created_at is a timestamp without time zone, taken as UTC.
	createdAtLocal bool
}

// decodeRelation: Byte1('R') Int32 relation OID, String namespace, String
// relation name, Int8 replica identity, Int16 column count, then per column
// Int8 flags, String name, Int32 type OID, Int32 type modifier.
func (d *Decoder) decodeRelation(data []byte, m *Message) error {
	r := reader{data: data, off: 1}
	oid, err := r.uint32("relation OID")
	if err != nil {
		return err
	}
	ns, err := r.cstring("namespace")
	if err != nil {
		return err
	}
	name, err := r.cstring("relation name")
	if err != nil {
		return err
	}
	if _, err := r.uint8("replica identity"); err != nil {
		return err
	}
	countOff := r.off
	n, err := r.int16("column count")
	if err != nil {
		return err
	}
	if n < 0 {
		return r.errorf(countOff, "negative column count %d", n)
	}
	// Each column takes at least 10 bytes (flags, empty name, type, typmod);
	// checking up front keeps a bogus count from sizing an allocation.
	if need := int(n) * 10; need > r.left() {
		return r.errorf(countOff, "%d columns need at least %d bytes but %d are left in message (%d bytes)", n, need, r.left(), len(data))
	}

	var t *target
	for i := range d.tables {
		if string(ns) == d.tables[i].schema && string(name) == d.tables[i].table {
			t = &d.tables[i]
			break
		}
	}
	ours := t != nil
	var rel *relation
	if ours {
		rel = &relation{t: t, ncols: int(n), field: make([]int8, n)}
		if len(t.placed) > 0 {
			rel.placedPos = make([]int, len(t.placed))
			rel.placedType = make([]string, len(t.placed))
			for k := range rel.placedPos {
				rel.placedPos[k] = -1
			}
		}
	}
	var seen [numFields]bool
	var fs []int8
	for i := range int(n) {
		if _, err := r.uint8("column flags"); err != nil {
			return err
		}
		col, err := r.cstring("column name")
		if err != nil {
			return err
		}
		typ, err := r.uint32("column type OID")
		if err != nil {
			return err
		}
		typmod, err := r.uint32("column type modifier")
		if err != nil {
			return err
		}
		if ours {
			fs = t.fieldsOf(fs[:0], col)
			rel.field[i] = -1
			for j, f := range fs {
				if j == 0 {
					rel.field[i] = f
				} else {
					rel.shared = append(rel.shared, [2]int8{fs[0], f})
				}
				if f < numFields {
					seen[f] = true
				}
				switch f {
				case fieldPayload:
					rel.payloadBytea = typ == oidBytea
					rel.payloadType = payloadTypeOf(typ)
				case fieldCreatedAt:
					rel.createdAtLocal = typ == oidTimestamp
				}
			}
			for k, pc := range t.placed {
				if string(col) == pc.column {
					rel.placedPos[k] = i
					rel.placedType[k] = formatType(typ, int32(typmod))
				}
			}
		}
	}
	if err := r.end(); err != nil {
		return err
	}

	if !ours {
		d.rels[oid] = nil
		return nil
	}
	for f, ok := range seen {
		if !ok && t.names[f] != "" {
			rel.err = &SchemaError{Table: t.qualified, Column: t.names[f]}
			d.rels[oid] = rel
			return rel.err
		}
	}
	present := false
	for k, pc := range t.placed {
		if rel.placedPos[k] < 0 && pc.kind != placedTrace {
			rel.err = &SchemaError{Table: t.qualified, Column: pc.column}
			d.rels[oid] = rel
			return rel.err
		}
		present = present || rel.placedPos[k] >= 0
	}
	if !present {
		rel.placedPos = nil // only a trace column the table lacks: inserts read nothing more
	}
	d.rels[oid] = rel
	m.Kind = KindRelation
	return nil
}

// payloadTypeOf names a payload column's type as outbox.Event.PayloadType does;
// varchar and any other text-like type is "text".
func payloadTypeOf(oid uint32) string {
	switch oid {
	case oidBytea:
		return "bytea"
	case oidJSON:
		return "json"
	case oidJSONB:
		return "jsonb"
	}
	return "text"
}
