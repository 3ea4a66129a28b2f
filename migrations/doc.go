// Package migrations creates walrelay's schema and creates or adopts the outbox
// table (`walrelay migrate`).
//
// Two parts, applied in one transaction:
//
//   - walrelay's own tables, versioned: SQL files embedded in the binary, applied in
//     order and recorded in walrelay_schema_version (goose's layout, which earlier
//     versions used): processed_events, the consumer-side deduplication table, and
//     walrelay_slots, the slots' catch-up record;
//   - the outbox table, planned from the catalog (plan.go), because its name and
//     columns are the user's and it may predate walrelay: the table when missing;
//     otherwise only the bookkeeping columns it lacks (attempts, processed_at,
//     retry_after, last_error, dead_lettered_at, all nullable or defaulted); the
//     partial indexes on pending and handed-over rows and the dead-letter view, named
//     after the table (indexes.go);
//     the insert-only publication. An object of walrelay's name that means something
//     else is a conflict: reported with what to do, and nothing is changed.
//
// On tables over DefaultLargeTable rows (a partitioned table's: over its partitions)
// the indexes are built with CREATE INDEX CONCURRENTLY after the commit (it cannot run
// in a transaction), per partition on a partitioned table; an INVALID index a failed
// build left is built again by the next run. A PostgreSQL advisory
// lock keeps two runs from racing, and running it again changes nothing.
package migrations
