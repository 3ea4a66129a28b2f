package migrations

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// defaultProgressEvery is how often a concurrent index build prints its progress.
const defaultProgressEvery = 5 * time.Second

// watchIndexBuild prints, every o.ProgressEvery until stop is called, the progress
// of the index build that the backend pid runs (pg_stat_progress_create_index),
// read over a connection of its own. A watch that cannot connect prints why once
// and leaves the build alone.
func watchIndexBuild(ctx context.Context, o Options, pid uint32, out io.Writer) (stop func()) {
	every := o.ProgressEvery
	if every <= 0 {
		every = defaultProgressEvery
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ticker := time.NewTicker(every)
		defer ticker.Stop()
		var conn *pgx.Conn
		defer func() {
			if conn != nil {
				conn.Close(context.Background())
			}
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			if conn == nil {
				var err error
				if conn, err = o.connect(ctx); err != nil {
					if ctx.Err() == nil {
						fmt.Fprintf(out, "  (no progress report: %v)\n", err)
					}
					return
				}
			}
			line, err := indexProgress(ctx, conn, pid)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				fmt.Fprintf(out, "  (no progress report: %v)\n", err)
				return
			}
			if line != "" {
				fmt.Fprintln(out, "  "+line)
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// indexProgress describes the index build of backend pid in one line, or "" when it
// has none under way.
func indexProgress(ctx context.Context, conn *pgx.Conn, pid uint32) (string, error) {
	var index, phase string
	var lockersTotal, lockersDone, blocksTotal, blocksDone, tuplesTotal, tuplesDone int64
	err := conn.QueryRow(ctx, `SELECT CASE WHEN index_relid = 0 THEN '' ELSE index_relid::regclass::text END, phase,
			lockers_total, lockers_done, blocks_total, blocks_done, tuples_total, tuples_done
		FROM pg_stat_progress_create_index WHERE pid = $1`, int64(pid)).
		Scan(&index, &phase, &lockersTotal, &lockersDone, &blocksTotal, &blocksDone, &tuplesTotal, &tuplesDone)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read pg_stat_progress_create_index: %w", err)
	}
	parts := []string{phase}
	if lockersTotal > 0 {
		parts = append(parts, fmt.Sprintf("waited for %d of %d transactions", lockersDone, lockersTotal))
	}
	if blocksTotal > 0 {
		parts = append(parts, fmt.Sprintf("blocks %d of %d (%.0f%%)", blocksDone, blocksTotal, 100*float64(blocksDone)/float64(blocksTotal)))
	}
	if tuplesTotal > 0 {
		parts = append(parts, fmt.Sprintf("tuples %d of %d (%.0f%%)", tuplesDone, tuplesTotal, 100*float64(tuplesDone)/float64(tuplesTotal)))
	}
	name := "index"
	if index != "" {
		name = "index " + index
	}
	return "building " + name + ": " + strings.Join(parts, "; "), nil
}
