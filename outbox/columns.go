package outbox

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Columns names the outbox table's columns, for tables that are not walrelay's own:
// the article's, Debezium's (id, aggregatetype, aggregateid, type, payload), or any
// other. CreatedAt may be empty: the table has no such column, and the commit time
// stands in for it.
type Columns struct {
	ID            string
	AggregateType string
	AggregateID   string
	EventType     string
	Payload       string
	CreatedAt     string
}

// DefaultColumns are the article's names, which `walrelay migrate` creates.
func DefaultColumns() Columns {
	return Columns{ID: "id", AggregateType: "aggregate_type", AggregateID: "aggregate_id",
		EventType: "event_type", Payload: "payload", CreatedAt: "created_at"}
}

var columnName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,62}$`)

// Validate checks that each name is a plain SQL identifier and that the required
// ones are set.
func (c Columns) Validate() error {
	for _, col := range []struct {
		setting, name string
		optional      bool
	}{
		{"column-id", c.ID, false}, {"column-aggregate-type", c.AggregateType, false},
		{"column-aggregate-id", c.AggregateID, false}, {"column-event-type", c.EventType, false},
		{"column-payload", c.Payload, false}, {"column-created-at", c.CreatedAt, true},
	} {
		if col.name == "" && col.optional {
			continue
		}
		if !columnName.MatchString(col.name) {
			return fmt.Errorf("%s %q is not a column name (letters, digits, _ and $, not starting with a digit)", col.setting, col.name)
		}
	}
	return nil
}

// Shape is an outbox table as the relay found it in the catalog: where it is, what
// its columns are called, and the types that decide how their values are read and
// written. The relay reads it once at start (replication.CheckTable) and builds
// every statement from it, so that no SQL assumes walrelay's own column types.
type Shape struct {
	Schema, Name string
	Columns      Columns
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
}

// DefaultShape is the shape of the table `walrelay migrate` creates, under the name
// table (optionally schema-qualified).
func DefaultShape(table string) Shape {
	schema, name := "public", table
	if s, n, ok := strings.Cut(table, "."); ok {
		schema, name = s, n
	}
	return Shape{Schema: schema, Name: name, Columns: DefaultColumns(), IDType: "uuid",
		PayloadType: "jsonb", CreatedAtType: "timestamptz", Key: []string{"id"}}
}

// Ident is the table's quoted, schema-qualified name.
func (s Shape) Ident() string { return pgx.Identifier{s.Schema, s.Name}.Sanitize() }

// Qualified is schema.name, unquoted, for messages.
func (s Shape) Qualified() string { return s.Schema + "." + s.Name }
