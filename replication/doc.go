// Package replication owns the logical replication connection: START_REPLICATION,
// IDENTIFY_SYSTEM and the timeline history, the slot's creation over the
// replication protocol and its exported snapshot, keepalives and standby status
// updates, and the watermark that decides which LSN may be confirmed. What walrelay
// reads and records in PostgreSQL beside the stream (preflight checks, slot
// incarnations, claims, horizons, the confirmed-position record) is package catalog's.
//
// Guarantees:
//   - The flush LSN sent to PostgreSQL never passes the end of a transaction that has
//     an event not yet settled (see Watermark); with nothing in flight the server's
//     reported position is confirmed, so an idle outbox does not pin WAL.
//   - One goroutine uses the connection: it reads, and it sends status updates at
//     least every KeepaliveInterval even while the in-flight Window is full and reading
//     is paused, so a slow broker does not get the connection killed by
//     wal_sender_timeout.
//   - Protocol version 1 is requested, so only committed transactions arrive.
//   - While the stream brings 16 MB/s or more, the kernel holds reads back until 16 KiB
//     are there (SO_RCVLOWAT), for at most about 2 ms: fewer wake-ups per event, and
//     no delay at ordinary rates, where batching is off.
//
// It does not decode messages (package decoder) or talk to brokers (package sink).
package replication
