// Package pubsub is the Google Cloud Pub/Sub sink, built on
// cloud.google.com/go/pubsub/v2: each outbox event becomes one message, published
// with message ordering on, and is acknowledged only by the service's answer that
// it stored the message.
//
// # Messages
//
// The topic (its ID in Config.Project) comes from a template, default
// outbox.event.{aggregate_type}, the Kafka sink's topic names; topics must exist.
// The data and the attributes are the record package record makes of the event
// (Config.Format), as the Kafka sink's value and headers. With the default format
// the data is the payload; the attributes are id (the outbox row's UUID),
// event_type, aggregate_type, aggregate_id and created_at (RFC 3339 with
// nanoseconds, UTC), then the headers taken from columns (outbox.Event.Headers:
// placed columns, traceparent, tracestate). A tombstone (a NULL payload by
// default) is empty data with the attribute tombstone=true; a header with a null
// value is an empty attribute. The ordering key is the aggregate id, the record key of
// the other sinks; an empty aggregate id publishes without one, unordered.
//
// # Guarantees
//
// At least once. done(nil) comes only from the service's reply with a message id.
// Pub/Sub keeps no publisher state: a request whose reply was lost, sent again by
// the client or by the sink, stores its messages twice, and so does a relay that
// streams events again after a crash. Consumers deduplicate by the id attribute.
//
// Order: per ordering key within a topic, messages are stored in publish order, so
// an aggregate's events are in commit order, and the ordering rule (order.go) keeps
// it across failures: once an event of a key fails, nothing more of that key is
// sent until it is settled (handed over as an event error, or stored by a retry).
// An event handed over leaves the order, as with every sink. Subscribers see that
// order only on a subscription with message ordering enabled, and only while the
// messages of a key are published in one region: a locational Config.Endpoint
// pins it.
//
// # Failures
//
// An *sink.EventError, about the event alone: the message is over Pub/Sub's limits
// (10 MB encoded, 100 attributes, attribute keys of 256 bytes not starting with
// goog, values of 1024 bytes, an ordering key of 1 KB, valid UTF-8), which the sink
// checks before sending; or the service refused it with InvalidArgument (the topic's
// schema rejects it), NotFound (no such topic), PermissionDenied (the credentials
// may not publish to that topic) or FailedPrecondition. When several messages of one
// request are refused together, each is sent again alone first, so that only the
// one at fault is handed over.
//
// Anything else is the service's (unavailable, deadlines, quota, credentials
// refused, internal errors): the client retries the retriable ones for up to
// Config.Publish.Timeout (10s by default), then the sink sends the event again in its
// place after a backoff (200ms doubling to 2s), for as long as it takes, logging a
// warning at most every 10s. Nothing is handed over then, and nothing of the key
// overtakes it; the relay's in-flight window bounds what is held.
//
// # Not guaranteed
//
//   - Exactly once: Pub/Sub's exactly-once delivery is a subscription setting about
//     redelivery to subscribers; it does not drop a message published twice.
//   - Order without message ordering on the subscription, or across regions.
package pubsub
