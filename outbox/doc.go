// Package outbox is what applications import: the Event type, and Write/WriteSQL to
// insert an event inside the caller's own transaction (pgx or database/sql), so that
// the event is committed if and only if the business rows are.
//
// Emit/EmitSQL are the table-less outbox: they write the event as a transactional
// logical message (pg_logical_emit_message) in the caller's transaction instead of
// a row, which the relay decodes from the WAL with the same guarantees once its slot
// exists, and which leaves nothing in a table to mark or vacuum. MarshalMessage and
// UnmarshalMessage are its content encoding.
//
// walrelay publishes every committed event at least once; the record's "id" header
// is the event's UUID, which consumers use to ignore duplicates (for example by
// inserting it into processed_events in their own transaction).
//
// # Trace context
//
// A Writer with a TraceColumn stores the caller's span context (W3C traceparent,
// and tracestate when there is one) in that column of each row it inserts; the
// relay hands it on as the record's traceparent and tracestate headers, and the
// consumer package continues the trace from them. The package uses OpenTelemetry's
// API only: the application chooses the SDK.
package outbox
