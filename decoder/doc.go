// Package decoder turns pgoutput messages into outbox events. It is pure: it
// does no I/O and knows nothing about connections, LSN acknowledgement or
// brokers.
//
// # What it owns
//
// The payload of one XLogData message (a pgoutput protocol version 1
// message, text-format tuples) goes in; a [Message] comes out: Begin and
// Commit with their LSNs and commit time, an [outbox.Event] for each insert
// into the configured outbox table, KindHandedOver for an insert of a row
// that already belongs to the poller (retry_after set: walrelay's own
// re-insert of a failed event), and KindSkip for everything else the relay
// does not need (other tables, Update, Delete, Truncate, Type, Origin,
// logical decoding messages). With [Decoder.DecodeMessages], a transactional
// logical message with the given prefix is a table-less outbox event
// (KindMessage, written by outbox.Emit), and one whose content is not an event
// a [*MessageError]. The decoder keeps the relation cache that
// pgoutput's Relation messages describe: which relation OID is the outbox
// table and where its columns id, aggregate_type, aggregate_id, event_type,
// payload and created_at sit, and retry_after when the table has it (any
// order, extra columns ignored). A later
// Relation message for the same OID replaces the cached layout. The cache
// belongs to one replication session: use a new [Decoder] for each
// START_REPLICATION, and one goroutine at a time.
//
// # What it guarantees
//
//   - Decode never panics, whatever the bytes.
//   - Every error is one of four types, told apart with errors.As:
//     [*DecodeError] for bytes that are not a well-formed v1 message (the
//     stream is wrong: stop), [*SchemaError] when the outbox table lacks a
//     required column (the operator must migrate: stop), [*RowError] for a
//     well-formed row that cannot become an event (a required column NULL or
//     created_at not a finite timestamp), [*MessageError] for a logical
//     message with the events' prefix that is not an event; the decoder stays
//     usable after a RowError or a MessageError.
//   - Event fields never alias the input, so the caller may reuse its read
//     buffer at once. The strings and payload of events are carved from 64 KiB
//     slabs the decoder allocates, so decoding an insert costs no allocation of
//     its own in steady state; keeping any one field (say, ID in a dedup set)
//     keeps its slab alive, so clone with strings.Clone for long-lived use.
//     Treat them as read-only.
//   - CreatedAt and CommitTime are in UTC.
//
// # What it does not handle
//
// Streaming of in-progress transactions (protocol version 2: Stream Start,
// Stop, Commit, Abort) and two-phase messages are rejected with a
// DecodeError: walrelay starts replication with proto_version '1'. Values
// sent in binary format ('b', only with the binary option, which walrelay
// does not set) are taken verbatim as bytes like text values; a binary
// created_at will fail to parse and yield a RowError. Updates and deletes of
// outbox rows are skipped, not interpreted.
package decoder
