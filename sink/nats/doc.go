// Package nats is the NATS JetStream sink, built on nats.go's jetstream package:
// asynchronous publishes, each acknowledged only by the stream's PubAck, so an
// event counts as delivered only once the stream stored it (by the stream's own
// standard: its storage and replicas).
//
// Messages: the subject comes from a template (default
// "outbox.event.{aggregate_type}"); the data and the headers are the record
// package record makes of the event (Config.Format), the same as the Kafka sink's
// value and headers. With the default format the data is the payload and the
// headers are Nats-Msg-Id (the event id, for the stream's duplicate detection),
// id, event_type, aggregate_type, aggregate_id and created_at (RFC 3339 with
// nanoseconds, UTC), then the headers taken from columns (outbox.Event.Headers:
// placed columns, traceparent, tracestate). A tombstone (a NULL payload by
// default) is empty data with the header tombstone: true; a header with a null
// value is an empty header.
//
// # Guarantees
//
//   - At least once: done(nil) only on a PubAck. While the connection is down
//     events are held and sent again once it is back, for as long as it takes
//     (the relay's in-flight window bounds what is held). Publish never blocks on
//     the broker; at most MaxPending publishes await their PubAck at a time.
//
//   - No duplicates in the stream within its duplicate window: every message
//     carries Nats-Msg-Id = event id, and JetStream acknowledges but does not store
//     a message whose id it stored less than the window ago. So an event sent again
//     after a lost PubAck, a reconnect, or a relay that crashed and streams it
//     again within the window is stored once. A stream the sink creates has
//     DedupWindow (default 2m); an existing stream keeps its own window.
//
//   - Order: one goroutine sends in publish order over one connection, and the
//     stream stores in arrival order, so messages of a subject (and therefore of
//     an aggregate) are stored in publish order while connected. Across a
//     reconnect, the messages that were awaiting a PubAck are sent again in their
//     original order before any newer one (the client's reconnect buffer is
//     disabled so that nothing newer slips ahead); those the stream had stored
//     already are dropped as duplicates, so the order holds across reconnects too,
//     as long as the outage is shorter than the duplicate window.
//
// # Failures
//
// An error passed to done is an *sink.EventError when it is about the event alone
// and sending it again would give the same answer: the message is larger than the
// server's max_payload or the stream's max_msg_size, its headers exceed 64 KiB,
// its rendered subject is invalid (whitespace, empty token or wildcard, from an
// aggregate_type or event_type), or no stream captures its subject (no responders,
// and the server confirms no stream has the subject). Any other error is about the
// broker as a whole: JetStream not enabled, the stream full (discard new),
// sealed or offline, account limits, the sink closed, an error not known here.
// Nothing is handed over then; the relay retries the stream.
//
// Retried inside the sink instead of failing: a lost connection or the client's
// own back-pressure (for as long as it takes), and, while connected, no PubAck
// within 10s, JetStream temporarily unavailable or too busy, or no responders
// while a stream does capture the subject (a leader election): such a message is
// sent again up to 4 times with backoff. If it still fails, it is an event error
// when other messages were acknowledged meanwhile (a publish permission denied
// for its subject looks like this), and a broker error when none were.
//
// # Stream
//
// With CreateStream (the default in DefaultConfig), the stream is created when
// missing, by New, by Ping, and when a publish finds no stream for a subject it
// would capture: file storage, one replica, no limits (set retention yourself),
// subjects from the template's literal prefix ("outbox.event.>"). An existing
// stream is never changed. Ping fails while the stream is missing and
// CreateStream is off.
//
// # Not guaranteed
//
//   - Exactly once: beyond the duplicate window (an outage or a relay restart
//     longer than the window, or a stream created with a shorter one) an event can
//     be stored twice. Consumers deduplicate by the id header.
//   - The order of a message sent again alone while connected (after an ack
//     timeout or a transient JetStream error): later messages may already be
//     stored, so it lands after them. An event failed with an EventError is
//     handed to the relay's poller and leaves the order too.
//   - That an existing stream captures every subject the template can render: a
//     subject outside it fails its event (an EventError) at publish time.
package nats
