// Package migrations holds walrelay's versioned schema: SQL files embedded in the
// binary and applied in order by `walrelay migrate` (pressly/goose under the hood).
//
// Up is idempotent: applied versions are recorded in the walrelay_schema_version
// table and a PostgreSQL advisory lock keeps two concurrent runs from racing, so
// running it again changes nothing. The schema it creates:
//
//   - outbox_events: the article's table plus retry_after, last_error and
//     dead_lettered_at for the poller, and a partial index on pending rows;
//   - processed_events: the consumer-side deduplication table;
//   - outbox_dead_letters: a view of rows given up on;
//   - walrelay_slots: which replication slots finished their catch-up pass;
//   - the publication "walrelay", insert-only, for outbox_events.
package migrations
