// Package ops is the work done beside a relay, from its database and its HTTP
// address, with the relay's Config: what `walrelay status`, `walrelay dlq` and
// `walrelay replay` do, and what the admin API's /status, /dlq and /replay answer.
//
//   - Status (status.go, statuscode.go): ReadStatus reads the slot where it lives
//     (relay.SlotServer, for a --database-url naming several servers) and the rows
//     and walrelay's records where the relay writes them (BooksURL: the primary
//     while the database is a standby), asks the relay's /readyz and /metrics
//     (statusprobe.go), and lists problems; StatusExitCode ranks them into the exit
//     code docs/configuration.md lists. A slot counts as streamed only while a
//     walsender holds it and heard from its client within wal_sender_timeout
//     (streamed.go; docs/design.md invariant 11).
//
//   - Dead letters (deadletters.go): listed, retried and purged across the outbox
//     tables, through poller's store.
//
//   - Replay (replay.go, replaypause.go): reads rows and writes nothing: the slot and
//     the rows' bookkeeping are left as they are; its records carry ReplayHeader.
//     With ReplayOptions.Pause (a running relay's PauseGate) it publishes nothing
//     while the relay is paused.
//
// ops reads PostgreSQL through internal/dbconn and the relay's Config; it never
// reaches into a running relay, and relay never imports it.
package ops
