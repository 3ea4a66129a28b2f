// Package sqs is the Amazon SQS sink, built on aws-sdk-go-v2: events go to standard
// or FIFO queues in SendMessageBatch requests, and each entry's own result is its
// event's outcome.
//
// # Messages
//
// The queue comes from a template (default outbox-{aggregate_type}.fifo; SQS queue
// names allow letters, digits, '-' and '_', and a FIFO queue's name ends in .fifo).
// Queues are looked up once (GetQueueUrl, and GetQueueAttributes for the queue's
// MaximumMessageSize) and kept; they are never created. The body and the
// attributes are the record package record makes of the event (Config.Format), as
// the Kafka sink's value and headers. With the default format the body is the
// payload; a tombstone (a NULL payload by default) is the body "null" with the
// attribute tombstone = true (SQS refuses an empty body). The message attributes,
// all of type String, are id, event_type, aggregate_type, aggregate_id, created_at
// (RFC 3339 with nanoseconds, UTC), tombstone, then the headers taken from columns
// (outbox.Event.Headers: placed columns, traceparent, tracestate) in their order.
// SQS allows 10 attributes per message: walrelay's own five identify the event (the
// id is what consumers deduplicate on; Debezium's headers keep the id alone),
// tombstone changes what the body means, so they come first and leave five for the
// event's headers (CheckRecordColumns refuses a table whose headers could need
// more, before streaming). An empty value, a null one included, is left out: SQS
// refuses it.
//
// On a FIFO queue MessageGroupId is the aggregate id, so SQS keeps each aggregate's
// order, and MessageDeduplicationId is the event id, so SQS drops a repeat sent
// within its 5-minute deduplication window (an id SQS cannot take, over 128
// characters or outside printable ASCII, is sent as "sha256-" and its hash).
//
// # Guarantees
//
// At least once: done(nil) only when SQS listed the entry as Successful.
//
// Order per aggregate, on FIFO queues: a message group has at most one message in
// flight and a request carries at most one message of a group, so a group's next
// message is sent only once its previous one was accepted by SQS or settled as an
// *sink.EventError (see queue). Up to Config.MaxInFlightRequests requests are under
// way at once for different groups; retries happen in place, with the group held.
// A standard queue keeps no order (SQS does not); its events are batched in any
// request.
//
// # Failures
//
// An event whose message SQS would refuse for what it is fails with an
// *sink.EventError before it is sent: larger than the queue's MaximumMessageSize, an
// empty payload or one that is not text, more than 10 attributes, a header name SQS
// does not allow, a queue name from an aggregate_type or event_type that SQS does
// not allow. So does an entry SQS refuses as the sender's fault, a queue that does
// not exist or may not be written (AccessDenied, KMS), and a request refused as a
// whole for its content, after it was sent again one entry per request to find the
// culprit. The relay hands such events to the poller: they leave their
// aggregate's order, then become dead letters.
//
// Throttling, server errors, an entry failed on SQS's side and no answer are retried
// in place, with backoff up to 5s, for as long as it takes or until Close; nothing
// is failed meanwhile. Refused credentials, or none to be had, fail the events with
// a plain error: the relay treats the broker as unavailable and streams them again.
//
// # Not guaranteed
//
//   - Exactly once: a FIFO queue drops a repeat only within its 5-minute window; a
//     standard queue not at all. Consumers deduplicate on the id attribute.
//   - Order on a standard queue.
package sqs
