package ops

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/relay"
)

// DeadLetters are the dead letters of a relay's outbox tables, listed, retried and
// purged across them: what `walrelay dlq` and the admin API's /dlq do.
type DeadLetters struct {
	tables []deadLetterTable
}

type deadLetterTable struct {
	name string // schema-qualified
	*poller.Store
}

// TableDeadLetter is a dead letter with the table it is in.
type TableDeadLetter struct {
	Table string `json:"table"`
	poller.DeadLetter
}

// OpenDeadLetters reads the shapes of cfg's outbox tables (one, or its Tables) and
// returns their dead letters' books on pool.
func OpenDeadLetters(ctx context.Context, pool *pgxpool.Pool, cfg relay.Config) (*DeadLetters, error) {
	d := &DeadLetters{}
	for _, t := range cfg.OutboxTables() {
		shape, err := catalog.DescribeTable(ctx, pool, t.Table, t.Columns)
		if err != nil {
			return nil, err
		}
		d.tables = append(d.tables, deadLetterTable{shape.Qualified(), poller.NewStore(pool, shape, cfg.Retry)})
	}
	return d, nil
}

// List returns up to limit dead letters, oldest first, after skipping offset of
// them, and whether more follow. Each table is read up to offset+limit+1 rows: a
// page deep into a large queue costs its depth.
func (d *DeadLetters) List(ctx context.Context, offset, limit int) ([]TableDeadLetter, bool, error) {
	if offset < 0 || limit <= 0 {
		return nil, false, fmt.Errorf("list dead letters: offset %d and limit %d: want offset >= 0 and limit > 0", offset, limit)
	}
	letters := []TableDeadLetter{}
	for _, t := range d.tables {
		some, err := t.DeadLetters(ctx, offset+limit+1)
		if err != nil {
			return nil, false, fmt.Errorf("table %s: %w", t.name, err)
		}
		for _, l := range some {
			letters = append(letters, TableDeadLetter{t.name, l})
		}
	}
	sort.SliceStable(letters, func(i, j int) bool { return letters[i].CreatedAt.Before(letters[j].CreatedAt) })
	more := len(letters) > offset+limit
	letters = letters[min(offset, len(letters)):min(offset+limit, len(letters))]
	return letters, more, nil
}

// Retry gives dead letters (ids, or every one with all) a fresh set of attempts,
// due now, and returns how many it reset; the poller publishes them.
func (d *DeadLetters) Retry(ctx context.Context, ids []string, all bool) (int64, error) {
	return d.sum(func(t deadLetterTable) (int64, error) { return t.RetryDeadLetters(ctx, ids, all) })
}

// Purge deletes dead letters by id, or those dead-lettered longer ago than
// olderThan, and returns how many it deleted.
func (d *DeadLetters) Purge(ctx context.Context, ids []string, olderThan time.Duration) (int64, error) {
	return d.sum(func(t deadLetterTable) (int64, error) { return t.PurgeDeadLetters(ctx, ids, olderThan) })
}

// sum runs fn on every table and adds up the rows it changed.
func (d *DeadLetters) sum(fn func(deadLetterTable) (int64, error)) (int64, error) {
	var n int64
	for _, t := range d.tables {
		changed, err := fn(t)
		if err != nil {
			return n, fmt.Errorf("table %s: %w", t.name, err)
		}
		n += changed
	}
	return n, nil
}

// DeadLettersOf are the dead letters of a running relay's tables (Relay.Stores).
func DeadLettersOf(stores []relay.TableStore) *DeadLetters {
	d := &DeadLetters{}
	for _, s := range stores {
		d.tables = append(d.tables, deadLetterTable{s.Name, s.Store})
	}
	return d
}
