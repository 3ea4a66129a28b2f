// Package relay wires walrelay's pipeline and owns its lifecycle: preflight checks,
// the replication slot and its catch-up pass, the stream from PostgreSQL through the
// decoder to the sink, acknowledgements back to the watermark, reconnection, and
// graceful stop. The walrelay binary is a thin wrapper over it; applications can run
// it inside their own binary:
//
//	cfg := relay.DefaultConfig()
//	cfg.DatabaseURL = "postgres://relay@db/app"
//	cfg.KafkaBrokers = []string{"kafka:9092"}
//	r, err := relay.New(cfg) // validates; opens nothing
//	...
//	err = r.Run(ctx) // until ctx ends; nil after a graceful stop
//
// Guarantees:
//
//   - At least once: every outbox row committed after the slot was created is
//     published, and rows committed before it are published by a catch-up pass
//     through the slot's exported snapshot. The slot's confirmed LSN only passes a
//     transaction once every one of its events was acknowledged by the broker, so
//     after a crash PostgreSQL streams again whatever was not, and duplicates are
//     bounded by what was acknowledged in the last StatusInterval before the crash.
//
//   - Per-aggregate order: events are produced in commit order with the aggregate id
//     as the key, and the idempotent producer keeps that order across retries. The
//     catch-up pass orders by created_at and physical position instead, which differs
//     from commit order only for transactions that ran concurrently.
//
//   - Bounded memory: at most MaxInFlightEvents events and MaxInFlightBytes bytes
//     are unacknowledged; reading pauses meanwhile, status updates do not.
//
//   - Graceful stop: when ctx ends, reading stops, in-flight acks are awaited for
//     at most ShutdownTimeout, the safe LSN is confirmed, and Run returns nil.
//
//   - Poison events never block: an event that fails on its own (sink.EventError) is
//     handed to the poller with its attempt recorded in a committed transaction, and
//     only then counts as settled. A broker that is down as a whole hands nothing
//     over: the session is retried and the slot keeps the WAL.
//
//   - Bookkeeping before confirmation: with OnPublish mark or delete, an acked event
//     counts as settled only once its row's update committed.
//
//   - Exactly-once (Delivery ExactlyOnce, Kafka): the stream's events are produced in
//     Kafka transactions together with the stream position, which a new session
//     reads back to skip what is committed; read_committed consumers see each
//     streamed event once.
//
// Not guaranteed: exactly-once for events the poller retries or the catch-up pass
// publishes (at least once; consumers deduplicate by the id header); the order of
// an event handed to the poller relative to later events of its aggregate.
package relay
