// Package rabbitmq is the RabbitMQ (AMQP 0-9-1) sink, built on amqp091-go: one
// connection, one channel in publisher-confirm mode, persistent messages.
//
// # Messages
//
// The exchange and the routing key come from templates (default "outbox" and
// "{aggregate_type}.{event_type}"); with DeclareExchange the sink declares each
// exchange as a durable topic exchange the first time it uses it on a connection,
// otherwise it checks once per connection that the exchange exists. A message
// carries message_id = the event id, type = event_type, timestamp = created_at
// (whole seconds, as AMQP has it), content_type application/json, delivery mode 2
// (persistent), and the body and headers of the record package record makes of
// the event (Config.Format), as strings: with the default format the headers
// event_type, aggregate_type, aggregate_id and created_at (RFC 3339, nanoseconds;
// the id is message_id), then the headers taken from columns (outbox.Event.Headers:
// placed columns, traceparent, tracestate), and the payload as its body. A
// tombstone (a NULL payload by default) is an empty body with the header tombstone
// = true; a header with a null value is AMQP's void.
//
// # Guarantees
//
// At least once. An event is acknowledged (done(nil)) only on the broker's
// basic.ack for its delivery tag, which RabbitMQ sends once every queue the message
// was routed to has it (persisted, for a durable queue). Nothing is acknowledged
// without a confirm. Consumers must declare durable queues for the persistence to
// mean anything.
//
// Duplicates happen: when the connection or the channel fails, events without a
// confirm are published again on the next channel, and the broker may already have
// routed some of them. RabbitMQ has no broker-side deduplication (unlike Kafka's
// idempotent producer); consumers deduplicate on message_id, which is the outbox
// row's id (see package outbox).
//
// # Failures
//
// An event fails on its own (*sink.EventError, which the relay hands to the poller)
// when the broker nacks it; when it is returned as unroutable (Mandatory, the
// default: no queue is bound for its routing key); when its exchange does not
// exist, refuses the declare or refuses the publish (the broker closes the channel
// with a channel exception: the sink opens a new one and publishes the other events
// again); and when a name is longer than AMQP's 255 bytes. A channel exception is
// tied to its event by publishing the events that were unconfirmed when it hit
// again one at a time.
//
// Anything else is the broker's: the sink reconnects with capped, jittered
// exponential backoff (ReconnectMin to ReconnectMax) and publishes every event
// without a confirm again, for as long as it takes. While disconnected, Publish
// keeps queueing until MaxPending events wait in all; beyond that it fails events at
// once with a plain (broker-level) error, so that a long outage stops the relay's
// stream instead of growing memory. Close fails what is still unconfirmed with a
// broker-level error. A connection that goes silent without being closed (a network
// partition) is noticed by AMQP heartbeats: 10s by default, heartbeat= in the URL
// to change it; amqp091 gives up after three missed intervals.
//
// # Ordering
//
// Messages reach the broker in Publish order on one channel, and a queue keeps that
// order, so each aggregate's events arrive in commit order in a clean run. Across a
// reconnect or a channel exception, the unconfirmed events are published again, in
// order and before newer ones, but the broker may hold a first copy of some of them:
// a consumer then sees an older event again after newer ones (1 2 3 2 3 4). The
// first copies are in order (a broker takes a prefix of what a failing channel
// sent), so a consumer that drops what it has seen by message_id gets the order
// back. An event that failed on its own leaves the order: the relay's poller
// publishes it later.
//
// Publish never waits for the broker: at most MaxPending publishes are on the wire
// without a confirm, and later events wait in the sink, in order. The sink does not
// bound that wait while connected; the relay's in-flight window does.
package rabbitmq
