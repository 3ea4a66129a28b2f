package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier is what CleanupProcessed needs: *pgxpool.Pool, *pgx.Conn and pgx.Tx have it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// CleanupProcessed deletes the rows of DefaultTable older than olderThan; see
// Dedup.CleanupProcessed.
func CleanupProcessed(ctx context.Context, db Querier, olderThan time.Duration, batch int) (int64, error) {
	return Dedup{}.CleanupProcessed(ctx, db, olderThan, batch)
}

// CleanupProcessed deletes the dedup rows whose processed_at is older than
// olderThan, at most batch rows per statement (each its own transaction when db is
// a pool or a connection), and returns how many it deleted. The cutoff is taken
// once, from the database clock, when the call starts.
//
// Deduplication only holds within this retention: an event delivered again after
// its row was deleted runs again. Keep olderThan well above the longest time a
// record can wait to be re-delivered (consumer downtime, a replay from an old
// offset, the topic's retention if you ever rewind a group to the start).
//
// processed_at has no index in walrelay's migration; on a large table add one
// (CREATE INDEX ON processed_events (processed_at)) so each batch finds its rows
// without scanning.
func (d Dedup) CleanupProcessed(ctx context.Context, db Querier, olderThan time.Duration, batch int) (int64, error) {
	if olderThan <= 0 {
		return 0, errors.New("cleanup processed events: olderThan must be positive; it is how long event ids stay deduplicated")
	}
	if batch <= 0 {
		return 0, errors.New("cleanup processed events: batch must be positive")
	}
	var cutoff time.Time
	if err := db.QueryRow(ctx, "SELECT now() - make_interval(secs => $1::float8)", olderThan.Seconds()).Scan(&cutoff); err != nil {
		return 0, fmt.Errorf("cleanup processed events: read cutoff: %w", err)
	}
	t := d.ident()
	query := "DELETE FROM " + t + " WHERE event_id IN (SELECT event_id FROM " + t +
		" WHERE processed_at < $1 LIMIT $2)"
	var total int64
	for {
		tag, err := db.Exec(ctx, query, cutoff, batch)
		if err != nil {
			return total, fmt.Errorf("cleanup processed events older than %s from %s: %w",
				cutoff.Format(time.RFC3339), d.table(), err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			return total, nil
		}
	}
}
