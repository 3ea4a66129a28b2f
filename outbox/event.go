package outbox

import "time"

// Event is one row of the outbox table as the relay publishes it.
//
// ID is the row's UUID in its canonical text form; consumers use it to
// deduplicate. Payload holds the JSON document exactly as PostgreSQL renders
// it (jsonb normalises whitespace and key order).
type Event struct {
	ID            string
	AggregateType string
	AggregateID   string
	EventType     string
	Payload       []byte
	CreatedAt     time.Time
	// TopicTemplate, when set, is the topic template of the event's outbox table
	// ({aggregate_type}, {event_type}), used instead of the sink's own: a relay
	// streaming several tables sets it per table. Kafka, NATS, Redis and SQS sinks honour it.
	TopicTemplate string
	// Table is the outbox table the event comes from, schema-qualified
	// (schema.name), when the relay streams several; empty means its only one.
	Table string
	// Headers are record headers taken from the row's own columns (a column placed
	// as a header, the trace context), in the order configured. Sinks with headers
	// send them after the id header.
	Headers []Header
	// Partition is the text of the table's partition column (outbox.Columns.Partition),
	// "" when there is none or it is NULL. The Kafka sink produces to that partition;
	// a value that is not a partition of the topic is an error of the event.
	Partition string
	// NullPayload: the payload column was NULL. Payload is nil; the Kafka sink
	// publishes a record with a null value (a tombstone), the other sinks an empty
	// body with a tombstone header.
	NullPayload bool
	// Envelope are the values of the table's envelope columns (Columns.Envelope), in
	// their order, each under its alias; the record's value holds them beside the
	// payload.
	Envelope []Field
	// PayloadType is the payload column's type: "jsonb", "json", "text" or "bytea"
	// ("" is text). Converters that write JSON need it (package record).
	PayloadType string
}

// Header is one record header.
type Header struct {
	Key   string
	Value string
	// Type is the type of the column the header is placed from, as format_type
	// names it ("boolean", "timestamp(3) with time zone"), for a record format that
	// writes the value as Debezium's PostgreSQL connector does (package record); ""
	// for walrelay's own headers.
	Type string
	// Null marks a column that was NULL: Kafka with Debezium's headers writes it as
	// a header with a null value, as Kafka Connect does; every other record leaves
	// it out.
	Null bool
}

// Field is one value placed in the record's value beside the payload.
type Field struct {
	Key   string
	Value string
	Null  bool // the column was NULL
}

// Size is the number of bytes the event holds, used to bound in-flight memory.
func (e *Event) Size() int {
	n := len(e.ID) + len(e.AggregateType) + len(e.AggregateID) + len(e.EventType) + len(e.Payload) + len(e.Partition)
	for _, h := range e.Headers {
		n += len(h.Key) + len(h.Value)
	}
	for _, f := range e.Envelope {
		n += len(f.Key) + len(f.Value)
	}
	return n
}
