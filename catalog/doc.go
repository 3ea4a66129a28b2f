// Package catalog owns what walrelay reads and records in PostgreSQL outside the
// replication stream: an outbox table's shape and bookkeeping columns, the preflight
// checks and the SetupErrors they return, the publication, the slot's incarnations
// (walrelay_slots), the tables' claims (walrelay_table_slots), the published
// horizons (walrelay_progress), the origin a position belongs to (system identifier,
// database, slot incarnation, timeline), the confirmed-position record
// (walrelay_confirmed), and the one builder of the "published" condition that the
// pending view, walrelay status, retirement and catch-up passes share
// (published.go). Outside tests, help texts and messages, every statement naming a
// walrelay_* table or function is here or in package migrations
// (TestWalrelaySQLOnlyInCatalogAndMigrations).
//
// Invariants it keeps (docs/design.md):
//   - A published horizon has one owner and never moves back (invariant 10):
//     RecordPublished writes only for the slot's current incarnation, after its
//     catch-up pass is done, for tables the slot claims and a pass covered, in this
//     cluster and database, and never lower than a horizon recorded there.
//   - What "published" means is written once (invariant 10): NotPublished,
//     BelowHorizon, NotBelow and OlderThanXids, over walrelay_published,
//     walrelay_horizon and walrelay_full_xid (migrations 7 and 8); the pending view,
//     walrelay status, retirement and catch-up passes take their conditions here.
//   - One slot per table (invariant 10): ClaimTables refuses a table another slot
//     streams, with a SetupError that says how to move it; MarkCovered records a
//     pass only for the incarnation that ran it.
//   - A slot incarnation is named by its creation time (invariants 2 and 10):
//     RecordSlot starts a new one, MarkCatchupDone and RecordConfirmed write only
//     for the incarnation that is current, so a deposed leader cannot finish the new
//     leader's pass or move its position.
//   - A position knows where it came from (invariant 8): an Origin names cluster,
//     database, slot incarnation and timeline, and ReadConfirmed returns it with the
//     LSN; ReadPublished reads only a horizon that speaks for this database
//     (walrelay_recorded_here), and HorizonsElsewhere lists the others, for the log.
//   - The outbox table the slot streams is the one it was (invariant 9): TableWatch
//     compares the table's OID with the one walrelay_slots recorded.
//
// It does not open replication connections or stream (package replication), and
// never imports it (TestCatalogImportsNoReplication).
package catalog
