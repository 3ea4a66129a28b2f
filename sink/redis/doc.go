// Package redis is the Redis Streams sink, built on go-redis: each outbox event
// becomes one stream entry, appended by a small Lua script that also deduplicates.
//
// # Entries
//
// The stream comes from a template (default outbox.event.{aggregate_type}, the
// Kafka sink's topic names). The fields are the record package record makes of
// the event (Config.Format), in the Kafka sink's header order with the value
// between: with the default format id (the outbox row's UUID), event_type,
// aggregate_type, aggregate_id, created_at (RFC 3339 with nanoseconds, UTC) and
// payload (the payload's bytes), then the headers taken from columns
// (outbox.Event.Headers: placed columns, traceparent, tracestate) as fields of their
// own. A tombstone (a NULL payload by default) is an empty payload field and the
// field tombstone = true; a header with a null value is an empty field. With
// Config.MaxLen the stream is trimmed on write (XADD MAXLEN ~), so it holds at least
// MaxLen entries and a little more at times.
//
// # Guarantees
//
// At least once. An event is acknowledged (done(nil)) only from Redis's reply to the
// script that appended it, or that found it appended already. A batch that gets no
// reply (connection lost, timeout) or a reply about the server's state (LOADING,
// READONLY, MASTERDOWN, CLUSTERDOWN, TRYAGAIN, OOM, BUSY, NOREPLICAS) is sent again,
// with capped backoff, until Redis answers or the sink is closed; it never fails
// the event. Redis keeps no producer state, so without dedup a retried batch whose
// reply was lost appends its entries twice.
//
// Deduplication. Within Config.DedupWindow (default 24h) every event id is remembered
// per stream in the key walrelay:dedup:<stream>:<id> (SET NX PX). The key and the
// entry are written by one script, which Redis runs atomically: an entry never exists
// without its key, and a redelivery within the window (a retried batch, a relay that
// streams again after a restart) finds the key and adds nothing; it is acknowledged
// as published. When the append fails the key is removed again, so a later attempt
// is not taken for a duplicate. Choose a window longer than an event can stay
// unconfirmed (relay downtime, poller retries); after it, a redelivery appends again.
// Each key costs about 150 bytes of memory for the length of the window: some
// 150 MB per million events a window holds.
//
// Order. Within a stream, entries are in publish order. One goroutine sends one
// batch at a time and retries a failed batch before sending the next; the script
// stops at the first error, so events after a failed one are sent again after it,
// never before. An event that fails on its own leaves that order: it is handed to
// the poller, as with Kafka.
//
// Errors. An error Redis gives for one entry and would give again (WRONGTYPE: the
// stream's key holds another type; an ACL denial for that key; an argument the
// server refuses) is an *sink.EventError for that event, and the batch goes on
// without it. An error of the same kind for the whole script call (NOPERM for EVAL,
// a wrong password, an unknown command) fails that batch and everything queued
// behind it with a plain error: the relay treats the broker as unavailable and
// streams those events again.
//
// # What it does not do
//
// Durability is the Redis server's configuration, not the sink's: an acknowledged
// entry is in the server's memory. Without AOF (appendonly yes, ideally appendfsync
// always or everysec) a Redis restart loses the stream, and with replication a
// failover can lose the last writes unless WAIT is used, which this sink does not.
// With a maxmemory-policy that evicts any key (allkeys-*), Redis may evict streams;
// use noeviction (OOM is then retried until memory frees) or a volatile-* policy,
// which can evict only dedup keys and so weakens dedup but loses no entry.
// Redis Cluster is not supported: one batch spans keys in many hash slots.
package redis
