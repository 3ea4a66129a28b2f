// Package consumer is the receiving end of walrelay: it turns at-least-once
// delivery into one effect per event, for effects written to PostgreSQL.
//
// walrelay publishes every outbox event at least once, so a consumer can see an
// event again: after a relay restart, a producer retry, or its own crash between
// applying a record and committing the record's offset. Each record carries the
// event's UUID in its "id" header. Once (pgx) and OnceSQL (database/sql) insert
// that id into processed_events in the consumer's own transaction, with ON
// CONFLICT DO NOTHING, and run the handler only when a row was inserted; the
// caller commits, so the id is recorded if and only if the effects are. Run is a
// franz-go consumer-group loop built on Once: one transaction per record, and
// offsets committed only after the records' transactions committed.
//
// # Guarantees
//
// Each event id has its effects applied exactly once, provided that
//   - every effect is written with the transaction Once runs in (the tx passed
//     to the Handler), and the caller commits it only when Once returned no error;
//   - the id's row is still in the dedup table: CleanupProcessed deletes rows
//     older than a retention you choose, and an event delivered again after that
//     is applied again. Keep the retention above the longest possible re-delivery
//     delay (downtime, replays from old offsets);
//   - all consumers of an event id that must not repeat its effect share one dedup
//     table. Two consumer groups with different effects need different tables
//     (Dedup.Table or Config.Table), or the second group skips every event the
//     first one processed.
//
// A failed handler leaves nothing behind: its transaction rolls back, the id stays
// unrecorded, and the next attempt or delivery runs the handler again.
//
// # Not guaranteed
//
// Effects outside the transaction — an HTTP call, an e-mail, a message to another
// broker, a write to another database — can happen more than once: the handler may
// run, perform them, and then fail or be killed before the commit. Make those
// idempotent themselves (pass the event id as an idempotency key), or write them
// to an outbox in the same transaction and let a relay deliver them.
//
// Run processes the records of a batch one at a time, in order, so it keeps the
// per-aggregate order the relay gives each partition; a record that keeps failing
// stops the loop (Run returns a *RecordError) rather than being skipped.
//
// # Trace context
//
// Records carry the writer's trace context in their traceparent and tracestate
// headers when the outbox row had one (outbox.Writer.TraceColumn). Run extracts
// it and starts a consumer span per record as its child (Config.TracerProvider,
// the global provider by default), which the Handler's ctx carries; callers of
// Once and OnceSQL get the same parent from ContextFromHeaders.
package consumer
