package ops

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/relay"
)

// retentionNote says where a replay whose --since is older than the retention
// starts: rows created before the horizon are deleted (or about to be), so it
// replays from the oldest matching row still kept, and names its creation time.
// Empty when the filter asks for nothing older than the retention.
func retentionNote(ctx context.Context, pool *pgxpool.Pool, cfg relay.Config, f ReplayFilter, tables []replayTable, now time.Time) (string, error) {
	if cfg.Retention <= 0 || f.Since.IsZero() {
		return "", nil
	}
	horizon := now.Add(-cfg.Retention)
	if !f.Since.Before(horizon) {
		return "", nil
	}
	var oldest *time.Time
	for _, t := range tables {
		var at *time.Time
		if err := pool.QueryRow(ctx, "SELECT min("+replayCreatedAt(t.shape)+") FROM "+t.shape.Ident()+" WHERE "+t.where,
			t.args...).Scan(&at); err != nil {
			return "", fmt.Errorf("read the oldest row to replay in %s: %w", t.shape.Qualified(), err)
		}
		if at != nil && (oldest == nil || at.Before(*oldest)) {
			oldest = at
		}
	}
	said := fmt.Sprintf("--since %s is older than --retention %s (rows created before %s are deleted)",
		f.Since.UTC().Format(time.RFC3339), cfg.Retention, horizon.UTC().Format(time.RFC3339))
	if oldest == nil {
		return said + "; no matching row is kept", nil
	}
	return said + "; replaying from the oldest matching row still kept, created at " + oldest.UTC().Format(time.RFC3339Nano), nil
}
