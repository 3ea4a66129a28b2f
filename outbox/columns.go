package outbox

import (
	"fmt"
	"regexp"
	"strings"
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

// reservedHeaders are keys the sinks set themselves under either record-headers
// setting (see each sink's package doc).
var reservedHeaders = []string{"id", "payload", "tombstone", TraceParentHeader, TraceStateHeader, "Nats-Msg-Id"}

// walrelayHeaders are the keys walrelay sets only under record-headers walrelay
// (record.Format.Own); under debezium a column may be placed under one of them.
var walrelayHeaders = []string{"event_type", "aggregate_type", "aggregate_id", "created_at"}

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
		if reservedHeader(reservedHeaders, k) || webhookHeader(k) {
			return fmt.Errorf("column-headers: header %q is one walrelay sets itself; give column %s another header name (column:header)", k, h.Column)
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

// CheckWalrelayHeaders refuses a header column placed under a key walrelay sets
// itself under record-headers walrelay (event_type, aggregate_type, aggregate_id,
// created_at). It is checked where the record-headers setting is known; under
// debezium those keys are the columns'. Validate refuses the keys reserved under both.
func (c Columns) CheckWalrelayHeaders() error {
	for _, h := range c.Headers {
		if k := h.Key(); reservedHeader(walrelayHeaders, k) {
			return fmt.Errorf("column-headers: header %q is one walrelay sets itself under record-headers walrelay; "+
				"give column %s another header name (column:header), or set record-headers debezium, which leaves it to the column", k, h.Column)
		}
	}
	return nil
}

func reservedHeader(keys []string, k string) bool {
	for _, r := range keys {
		if strings.EqualFold(k, r) {
			return true
		}
	}
	return false
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
