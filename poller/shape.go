package poller

import (
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/catalog"
)

// ident quotes one column name.
func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// columns are a shape's column names, quoted, and the SQL that reads and writes
// their values whatever the table's types are.
type columns struct {
	id, aggType, aggID, eventType, payload, createdAt string // quoted; eventType and createdAt "" when the table has none
	// placed are the header, partition and trace columns (outbox.Columns.Placed), quoted.
	placed []string
	shape  catalog.Shape
}

func columnsOf(s catalog.Shape) columns {
	c := columns{id: ident(s.Columns.ID), aggType: ident(s.Columns.AggregateType), aggID: ident(s.Columns.AggregateID),
		payload: ident(s.Columns.Payload), shape: s}
	if s.Columns.EventType != "" {
		c.eventType = ident(s.Columns.EventType)
	}
	if s.Columns.CreatedAt != "" {
		c.createdAt = ident(s.Columns.CreatedAt)
	}
	for _, p := range s.Columns.Placed() {
		c.placed = append(c.placed, ident(p))
	}
	return c
}

// payloadExpr reads the payload column (qualified by prefix, e.g. "o.") as the bytes
// to publish: JSON as PostgreSQL renders it, text and bytea as they are.
func (c columns) payloadExpr(prefix string) string {
	if c.shape.PayloadType == "bytea" {
		return prefix + c.payload
	}
	return prefix + c.payload + "::text"
}

// eventTypeExpr reads the event type as text; a table without the column has the
// empty type (Debezium's router never reads one).
func (c columns) eventTypeExpr(prefix string) string {
	if c.eventType == "" {
		return "''::text"
	}
	return prefix + c.eventType + "::text"
}

// createdAtExpr reads the creation time as a timestamptz: a timestamp without time
// zone is taken as UTC; without the column, the time of reading stands in (the
// stream uses the commit time; the poller and the catch-up pass cannot know it).
func (c columns) createdAtExpr(prefix string) string {
	switch {
	case c.createdAt == "":
		return "now()"
	case c.shape.CreatedAtType == "timestamp":
		return "(" + prefix + c.createdAt + " AT TIME ZONE 'UTC')"
	}
	return prefix + c.createdAt
}

// order is the ORDER BY key of pending rows: created_at, then physical position
// (insertion order for appended rows); physical position alone without created_at.
func (c columns) order(prefix string) string {
	if c.createdAt == "" {
		return prefix + "ctid"
	}
	return prefix + c.createdAt + ", " + prefix + "ctid"
}

// selectList is what ScanEvent reads, in order, for a table aliased by prefix. The
// placed columns are read as text, which in the relay's sessions (DateStyle ISO,
// TimeZone UTC, bytea_output hex) is what pgoutput sends the stream.
func (c columns) selectList(prefix string) string {
	list := prefix + c.id + "::text, " + prefix + c.aggType + "::text, " + prefix + c.aggID + "::text, " +
		c.eventTypeExpr(prefix) + ", " + c.payloadExpr(prefix) + ", " + c.createdAtExpr(prefix)
	for _, p := range c.placed {
		list += ", " + prefix + p + "::text"
	}
	return list
}

// EventColumns is the select list ScanEvent reads, in order, for the table's shape.
func EventColumns(s catalog.Shape) string { return columnsOf(s).selectList("") }

// OrderBy is the order pending rows are published in (see columns.order).
func OrderBy(s catalog.Shape) string { return columnsOf(s).order("") }

// idArray is ids as one PostgreSQL array literal for a $1::<id type>[] parameter:
// much cheaper for pgx to send than a []string. pgx sends it in text format and the
// server parses it into a constant whose elements the planner reads, which keeps the
// index scan after a tiny table was analyzed (TestBookkeepingAfterTinyTable; a
// $1::text::uuid[] cast is not folded and ran a sequential scan). uuid and bigint ids
// need no quoting; text ids are quoted when they hold anything the array syntax reads.
func idArray(ids []string) string {
	n := 2 + len(ids)
	for _, id := range ids {
		n += len(id)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteByte('{')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		if !needsQuotes(id) {
			b.WriteString(id)
			continue
		}
		b.WriteByte('"')
		for j := 0; j < len(id); j++ {
			if id[j] == '"' || id[j] == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(id[j])
		}
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

func needsQuotes(s string) bool {
	if s == "" || strings.EqualFold(s, "null") {
		return true
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{', '}', ',', '"', '\\', ' ', '\t', '\n', '\r', '\v', '\f':
			return true
		}
	}
	return false
}
