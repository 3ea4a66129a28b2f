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
	// Headers places columns as record headers, in this order (Debezium's
	// table.fields.additional.placement col:header:alias). A NULL value leaves its
	// header out.
	Headers []HeaderColumn
	// Envelope places columns in the record value beside the payload, each under its
	// alias (Debezium's col:envelope:alias): the value becomes {"payload":…,"alias":…}
	// as the record's converter writes it (package record). Kafka only.
	Envelope []HeaderColumn
	// Partition, when set, is the column whose value is the Kafka partition of the
	// event's record (col:partition); NULL leaves the partition to the key hash.
	// Other sinks have no partitions.
	Partition string
	// Trace is the column holding the writer's trace context: a W3C traceparent, or
	// Debezium's serialized form (traceparent= and tracestate= lines). It is read
	// only when the table has it; empty: never.
	Trace string
}

// HeaderColumn places one column as a record header.
type HeaderColumn struct {
	Column string
	// Header is the header's key; empty means the column's name.
	Header string
}

// Key is the header's key.
func (h HeaderColumn) Key() string {
	if h.Header == "" {
		return h.Column
	}
	return h.Header
}

// DefaultTraceColumn is the trace column a table is read for unless told otherwise.
const DefaultTraceColumn = "traceparent"

// reservedHeaders are keys the sinks set themselves (see each sink's package doc).
var reservedHeaders = []string{"id", "event_type", "aggregate_type", "aggregate_id", "created_at", "payload",
	"tombstone", TraceParentHeader, TraceStateHeader, "Nats-Msg-Id"}

// webhookHeader is a name of the Standard Webhooks headers the HTTP sink sets
// (webhook-id, webhook-timestamp, webhook-signature, and any later one); it maps
// _ to -, so webhook_ is theirs too.
func webhookHeader(k string) bool {
	return len(k) >= 8 && strings.EqualFold(k[:8], "webhook-") || len(k) >= 8 && strings.EqualFold(k[:8], "webhook_")
}

// maxHeaderColumns bounds the header columns of a table.
const maxHeaderColumns = 64

// DefaultColumns are the article's names, which `walrelay migrate` creates.
func DefaultColumns() Columns {
	return Columns{ID: "id", AggregateType: "aggregate_type", AggregateID: "aggregate_id",
		EventType: "event_type", Payload: "payload", CreatedAt: "created_at", Trace: DefaultTraceColumn}
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
		{"column-aggregate-id", c.AggregateID, false}, {"column-event-type", c.EventType, true},
		{"column-payload", c.Payload, false}, {"column-created-at", c.CreatedAt, true},
		{"column-partition", c.Partition, true}, {"column-trace", c.Trace, true},
	} {
		if col.name == "" && col.optional {
			continue
		}
		if !columnName.MatchString(col.name) {
			return fmt.Errorf("%s %q is not a column name (letters, digits, _ and $, not starting with a digit)", col.setting, col.name)
		}
	}
	if len(c.Headers) > maxHeaderColumns {
		return fmt.Errorf("column-headers places %d columns; at most %d", len(c.Headers), maxHeaderColumns)
	}
	aliases := map[string]bool{"payload": true}
	for _, f := range c.Envelope {
		if !columnName.MatchString(f.Column) {
			return fmt.Errorf("column-envelope: %q is not a column name (letters, digits, _ and $, not starting with a digit)", f.Column)
		}
		if aliases[f.Key()] {
			return fmt.Errorf("column-envelope: field %q is there already (payload is the payload's); give column %s another name (column:field)", f.Key(), f.Column)
		}
		aliases[f.Key()] = true
	}
	keys := map[string]bool{}
	for _, h := range c.Headers {
		if !columnName.MatchString(h.Column) {
			return fmt.Errorf("column-headers: %q is not a column name (letters, digits, _ and $, not starting with a digit)", h.Column)
		}
		k := h.Key()
		for _, r := range reservedHeaders {
			if strings.EqualFold(k, r) || webhookHeader(k) {
				return fmt.Errorf("column-headers: header %q is one walrelay sets itself; give column %s another header name (column:header)", k, h.Column)
			}
		}
		if !validHeaderKey(k) {
			return fmt.Errorf("column-headers: header %q of column %s: use letters, digits, '-', '_' and '.'", k, h.Column)
		}
		if keys[strings.ToLower(k)] {
			return fmt.Errorf("column-headers: header %q is placed twice; give each column its own header", k)
		}
		keys[strings.ToLower(k)] = true
	}
	return nil
}

// validHeaderKey admits the keys every sink can carry (NATS headers are MIME
// header names; AMQP table keys and Redis fields take anything).
func validHeaderKey(k string) bool {
	if k == "" || len(k) > 128 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// Placed are the columns read besides the event's own, in the order the decoder
// and the poller read them: the header columns, then the partition and trace
// columns when set.
func (c Columns) Placed() []string {
	out := make([]string, 0, len(c.Headers)+2)
	for _, h := range c.Headers {
		out = append(out, h.Column)
	}
	if c.Partition != "" {
		out = append(out, c.Partition)
	}
	if c.Trace != "" {
		out = append(out, c.Trace)
	}
	for _, f := range c.Envelope {
		out = append(out, f.Column)
	}
	return out
}

// ParseHeaderColumns reads column-headers: comma-separated column or
// column:header entries (tenant_id:tenant).
func ParseHeaderColumns(v string) ([]HeaderColumn, error) {
	var out []HeaderColumn
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		col, header, _ := strings.Cut(part, ":")
		col, header = strings.TrimSpace(col), strings.TrimSpace(header)
		if strings.Contains(header, ":") || col == "" {
			return nil, fmt.Errorf("column-headers entry %q: want column or column:header, e.g. tenant_id:tenant", part)
		}
		out = append(out, HeaderColumn{Column: col, Header: header})
	}
	return out, nil
}

// FormatHeaderColumns is the column-headers text of hs, ParseHeaderColumns' inverse.
func FormatHeaderColumns(hs []HeaderColumn) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = h.Column
		if h.Header != "" && h.Header != h.Column {
			parts[i] += ":" + h.Header
		}
	}
	return strings.Join(parts, ",")
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
	cols := DefaultColumns()
	cols.Trace = "" // the table migrate creates has no trace column
	return Shape{Schema: schema, Name: name, Columns: cols, IDType: "uuid",
		PayloadType: "jsonb", CreatedAtType: "timestamptz", Key: []string{"id"}}
}

// Ident is the table's quoted, schema-qualified name.
func (s Shape) Ident() string { return pgx.Identifier{s.Schema, s.Name}.Sanitize() }

// Qualified is schema.name, unquoted, for messages.
func (s Shape) Qualified() string { return s.Schema + "." + s.Name }
