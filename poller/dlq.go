package poller

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DeadLetter is a row given up on after the policy's attempts.
type DeadLetter struct {
	ID             string    `json:"id"`
	AggregateType  string    `json:"aggregate_type"`
	AggregateID    string    `json:"aggregate_id"`
	EventType      string    `json:"event_type"`
	Attempts       int       `json:"attempts"`
	LastError      string    `json:"last_error"`
	CreatedAt      time.Time `json:"created_at"`
	DeadLetteredAt time.Time `json:"dead_lettered_at"`
}

// DeadLetters lists up to limit dead letters, oldest first.
func (s *Store) DeadLetters(ctx context.Context, limit int) ([]DeadLetter, error) {
	c := s.cols
	created := "NULL::timestamptz" // a table without created_at: left zero
	if c.createdAt != "" {
		created = c.createdAtExpr("")
	}
	rows, err := s.pool.Query(ctx, `SELECT coalesce(`+c.id+`::text, ''), `+c.aggType+`::text, `+c.aggID+`::text, `+c.eventTypeExpr("")+`,
			attempts, coalesce(last_error, ''), `+created+`, dead_lettered_at
		FROM `+s.table+` WHERE dead_lettered_at IS NOT NULL AND processed_at IS NULL
		ORDER BY `+c.order("")+` LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeadLetter, error) {
		var d DeadLetter
		var created *time.Time
		err := r.Scan(&d.ID, &d.AggregateType, &d.AggregateID, &d.EventType, &d.Attempts, &d.LastError, &created, &d.DeadLetteredAt)
		if created != nil {
			d.CreatedAt = *created
		}
		return d, err
	})
}

// RetryDeadLetters gives dead letters (the ids, or all when ids is empty and all is
// true) a fresh set of attempts, due now, and returns how many it reset.
func (s *Store) RetryDeadLetters(ctx context.Context, ids []string, all bool) (int64, error) {
	where, args := s.deadLetterFilter(ids, all)
	tag, err := s.pool.Exec(ctx, "UPDATE "+s.table+
		" SET attempts = 0, retry_after = now(), dead_lettered_at = NULL WHERE "+where, args...)
	if err != nil {
		return 0, fmt.Errorf("retry dead letters: %w", err)
	}
	return tag.RowsAffected(), nil
}

// PurgeDeadLetters deletes dead letters by id, or those dead-lettered before the
// cutoff, and returns how many it deleted.
func (s *Store) PurgeDeadLetters(ctx context.Context, ids []string, olderThan time.Duration) (int64, error) {
	where, args := s.deadLetterFilter(ids, len(ids) == 0)
	if len(ids) == 0 {
		where += " AND dead_lettered_at < now() - make_interval(secs => $1::float8)"
		args = []any{olderThan.Seconds()}
	}
	tag, err := s.pool.Exec(ctx, "DELETE FROM "+s.table+" WHERE "+where, args...)
	if err != nil {
		return 0, fmt.Errorf("purge dead letters: %w", err)
	}
	return tag.RowsAffected(), nil
}

func (s *Store) deadLetterFilter(ids []string, all bool) (string, []any) {
	where := "dead_lettered_at IS NOT NULL AND processed_at IS NULL"
	if !all {
		return where + " AND " + s.idIn(), []any{idArray(ids)}
	}
	return where, nil
}
