// Package poller is walrelay's slow path: the bookkeeping the stream cannot do.
//
//   - Store: the SQL on the outbox table: recording failed attempts (attempts,
//     last_error, retry_after with capped exponential backoff and jitter, dead letter
//     at the policy's maximum), marking or deleting published rows, deleting
//     processed rows past the retention, and the dead-letter operations.
//   - Bookkeeper: batches the outcomes of streamed events into one transaction per
//     tick and settles each event only after that transaction committed.
//   - Poller: publishes due rows selected with FOR UPDATE SKIP LOCKED; in stream mode
//     the rows the stream handed over, in poll-only mode every pending row.
//
// Guarantees: a row stays locked from selection until its outcome is committed, so
// concurrent pollers never publish it twice within one attempt; a row is published
// only when no earlier due row of its aggregate is held by another poller, so
// per-aggregate order holds across pollers; a broker outage counts no attempt
// against any row; pending and dead-letter rows are never deleted by the cleanup.
package poller
