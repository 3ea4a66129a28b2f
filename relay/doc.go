// Package relay wires walrelay's pipeline and owns its lifecycle: preflight checks,
// the replication slot and its catch-up pass, the stream from PostgreSQL through the
// decoder to the sink, acknowledgements back to the watermark, reconnection, and
// graceful stop. It knows the broker only as a sink.Sink, so a program that embeds it
// links just the client it builds. The walrelay binary is a thin wrapper over it:
//
//	snk, err := kafka.New(kafka.Config{Brokers: []string{"kafka:9092"}}) // package sink/kafka
//	...
//	defer snk.Close()
//	cfg := relay.DefaultConfig()
//	cfg.DatabaseURL = "postgres://relay@db/app"
//	cfg.Sink = snk
//	r, err := relay.New(cfg) // validates; opens nothing
//	...
//	err = r.Run(ctx) // until ctx ends; nil after a graceful stop
//
// The invariants these guarantees rest on are numbered in docs/design.md; settle.go
// says what settled means for every outcome.
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
//   - Publishing never stops the stream: sink.Sink.Publish must not block, and the
//     built-in sinks never wait on their client, also while a replay or the poller
//     fills it and the broker is silent; with Delivery ExactlyOnce the Kafka commit
//     runs beside the stream, whose events wait in the window meanwhile.
//
//   - Graceful stop: when ctx ends, the stream reads on to the end of the open
//     transaction, in-flight acks are awaited, the safe LSN is confirmed, all within
//     ShutdownTimeout, and Run returns nil.
//
//   - Poison events never block: an event that fails on its own (sink.EventError) is
//     handed to the poller with its attempt recorded in a committed transaction, and
//     only then counts as settled. A broker that is down as a whole hands nothing
//     over: the session is retried and the slot keeps the WAL.
//
//   - Bookkeeping before confirmation: with OnPublish mark or delete, an acked event
//     counts as settled only once its row's update committed.
//
//   - Published without a write per row: with OnPublish progress (the stream's
//     default) an acked event settles at once, and a published horizon, recorded once
//     per ProgressInterval and only once the confirmed LSN covers it, says which rows
//     were published; a lost slot's catch-up pass leaves those out.
//
//   - Exactly-once (Delivery ExactlyOnce, a sink.Transactional such as Kafka's): the
//     stream's events are produced in transactions together with the stream position
//     and its origin, which a new session reads back to skip what is committed when
//     the origin is its own; read_committed consumers see each streamed event once.
//
//   - Table-less events (outbox.Emit, Config.MessagePrefix): transactional logical
//     messages with the prefix are published like rows, in their transaction's
//     order, settled at the ack (there is no row to mark); a refused one becomes a
//     row for the poller and a malformed one a dead-letter row, committed before the
//     LSN passes them (message.go).
//
//   - Pause (Relay.Pause, Config.StartPaused, POST /pause): nothing is read or
//     published, the stream stops at a message boundary and keeps sending status
//     updates, so the session survives wal_sender_timeout; Resume reads on from the
//     next message, so nothing is skipped or repeated (pause.go). The poller waits
//     before its next batch, an admin replay before its next event (PauseGate;
//     ops/replaypause.go).
//
//   - One server per session (pair.go): with a DatabaseURL that names several
//     servers, the leadership lock, the slot and the replication connection are on
//     the one the slot is on; while it does not answer the relay waits, and it
//     creates the slot only where the URL prefers, once every server answered.
//
// The relay serves nothing itself: package admin serves it over HTTP (/metrics,
// /healthz, /readyz, the admin API, the profiler), and what it reads of the relay
// is the surface in surface.go, ready.go and pause.go. The relay imports neither
// admin nor ops (deps_test.go).
//
// Not guaranteed: a table-less event committed before the slot existed, or while a
// lost slot was replaced, is not published (no row for the catch-up pass);
// exactly-once for events the poller retries or the catch-up pass
// publishes (at least once; consumers deduplicate by the id header); the order of
// an event handed to the poller relative to later events of its aggregate.
package relay
