package catalog

import (
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/outbox"
)

// Shape is an outbox table as the relay found it in the catalog: where it is, what
// its columns are called, and the types that decide how their values are read and
// written. The relay reads it once at start (CheckTable) and builds
// every statement from it, so that no SQL assumes walrelay's own column types.
type Shape struct {
	Schema, Name string
	Columns      outbox.Columns
	// IDType is the type an array of ids is cast to so that id = ANY(...) keeps the
	// primary-key index: "uuid", "text" or "bigint".
	IDType string
	// PayloadType is "jsonb", "json", "text" or "bytea". Text and bytea payloads are
	// published as their raw bytes.
	PayloadType string
	// CreatedAtType is "timestamptz", "timestamp" (without time zone, read as UTC),
	// or "" when the table has no creation time column.
	CreatedAtType string
	// Key is the columns of the unique index on id (the primary key), which the
	// bookkeeping's INSERT ... ON CONFLICT names: (id), or (id, created_at) on a
	// table partitioned by created_at.
	Key []string
	// Partitioned: a partitioned table, published through its root.
	Partitioned bool
	// PlacedTypes are the types (format_type) of the columns Columns.Placed names,
	// so that an event's row can be written again with them: the poller's copy of an
	// event whose row is gone. A placed column without a type here is left out.
	PlacedTypes map[string]string
}

// DefaultShape is the shape of the table `walrelay migrate` creates, under the name
// table (optionally schema-qualified).
func DefaultShape(table string) Shape {
	schema, name := "public", table
	if s, n, ok := strings.Cut(table, "."); ok {
		schema, name = s, n
	}
	cols := outbox.DefaultColumns()
	cols.Trace = "" // the table migrate creates has no trace column
	return Shape{Schema: schema, Name: name, Columns: cols, IDType: "uuid",
		PayloadType: "jsonb", CreatedAtType: "timestamptz", Key: []string{"id"}}
}

// Ident is the table's quoted, schema-qualified name.
func (s Shape) Ident() string { return pgx.Identifier{s.Schema, s.Name}.Sanitize() }

// Qualified is schema.name, unquoted, for messages.
func (s Shape) Qualified() string { return s.Schema + "." + s.Name }
