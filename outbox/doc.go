// Package outbox is what applications import: the Event type, and Write/WriteSQL to
// insert an event inside the caller's own transaction (pgx or database/sql), so that
// the event is committed if and only if the business rows are.
//
// walrelay publishes every committed event at least once; the record's "id" header
// is the event's UUID, which consumers use to ignore duplicates (for example by
// inserting it into processed_events in their own transaction).
package outbox
