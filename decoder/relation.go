package decoder

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

// columnNames are the outbox table's column names, indexed by field.
var columnNames = [numColumns]string{
	fieldID:            "id",
	fieldAggregateType: "aggregate_type",
	fieldAggregateID:   "aggregate_id",
	fieldEventType:     "event_type",
	fieldPayload:       "payload",
	fieldCreatedAt:     "created_at",
	fieldRetryAfter:    "retry_after",
}

func fieldOf(name []byte) int8 {
	for f, c := range columnNames {
		if string(name) == c {
			return int8(f)
		}
	}
	return -1
}

// relation is the cached layout of the outbox table.
type relation struct {
	ncols int
	// field maps a tuple column position to a field, or -1 for columns the
	// relay ignores.
	field []int8
	// err is set when the table lacks a required column; inserts return it.
	err *SchemaError
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

	ours := string(ns) == d.schema && string(name) == d.table
	var rel *relation
	if ours {
		rel = &relation{ncols: int(n), field: make([]int8, n)}
	}
	var seen [numFields]bool
	for i := range int(n) {
		if _, err := r.uint8("column flags"); err != nil {
			return err
		}
		col, err := r.cstring("column name")
		if err != nil {
			return err
		}
		if _, err := r.uint32("column type OID"); err != nil {
			return err
		}
		if _, err := r.uint32("column type modifier"); err != nil {
			return err
		}
		if ours {
			f := fieldOf(col)
			rel.field[i] = f
			if f >= 0 && f < numFields {
				seen[f] = true
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
		if !ok {
			rel.err = &SchemaError{Table: d.qualified, Column: columnNames[f]}
			d.rels[oid] = rel
			return rel.err
		}
	}
	d.rels[oid] = rel
	m.Kind = KindRelation
	return nil
}
