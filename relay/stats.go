package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// stats reads the slot's health and the table's counts every interval and detects
// a stalled relay: lag growing while the confirmed LSN stands still. The slot is
// read on slots, the standby when it is there.
func (r *Relay) stats(ctx context.Context, pool, slots *pgxpool.Pool) error {
	ticker := newAlignedTicker(r.cfg.StatsInterval)
	defer ticker.stop()
	var lastLSN string
	var lastLag int64
	lastMove := time.Now()
	for {
		var slotLag int64
		if err := r.readTableStats(ctx, pool); err != nil && ctx.Err() == nil {
			r.log.Warn("reading outbox stats failed", "err", err)
		}
		if r.cfg.Mode == ModeStream {
			lsn, lag, err := r.readSlotStats(ctx, slots)
			slotLag = lag
			switch {
			case ctx.Err() != nil:
			case err != nil:
				r.log.Warn("reading slot stats failed", "slot", r.cfg.Slot, "err", err)
			case r.pause.Paused():
				// Lag grows by choice while paused; the stall clock starts at the resume.
				lastLSN, lastLag, lastMove = lsn, lag, time.Now()
				r.stalled.Store(false)
			case lsn != lastLSN || lag <= lastLag && lag < 1<<20:
				lastLSN, lastLag, lastMove = lsn, lag, time.Now()
				if r.stalled.Swap(false) {
					r.log.Info("relay no longer stalled", "slot", r.cfg.Slot, "confirmed_lsn", lsn)
				}
			case lag > lastLag && time.Since(lastMove) > r.cfg.StallTimeout:
				if !r.stalled.Swap(true) {
					r.log.Error("relay stalled: slot lag grows while the confirmed LSN has not moved; "+
						"check the broker, the relay's logs and walrelay status", "slot", r.cfg.Slot,
						"confirmed_lsn", lsn, "lag_bytes", lag, "since", lastMove.UTC().Format(time.RFC3339))
				}
			}
		}
		if r.stalled.Load() {
			r.metrics.stalled.Set(1)
		} else {
			r.metrics.stalled.Set(0)
		}
		r.sample(slotLag)
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
			ticker.rearm()
		}
	}
}

func (r *Relay) readTableStats(ctx context.Context, pool *pgxpool.Pool) error {
	// In stream mode the rows not handed over are in flight (counted by the window)
	// or just not marked yet, so only handed-over rows and dead letters are read, through
	// their small index; in poll mode every unprocessed row waits.
	rows := "processed_at IS NULL AND (retry_after IS NOT NULL OR dead_lettered_at IS NOT NULL)"
	if r.cfg.Mode == ModePoll {
		rows = "processed_at IS NULL"
	}
	var allWaiting, allDead int64
	for _, t := range r.tables {
		var waitingRows, dead int64
		err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE dead_lettered_at IS NULL),
			count(*) FILTER (WHERE dead_lettered_at IS NOT NULL)
		FROM `+t.shape.Ident()+` WHERE `+rows).Scan(&waitingRows, &dead)
		if err != nil {
			return fmt.Errorf("table %s: %w", t.name, err)
		}
		r.metrics.tableWaiting.WithLabelValues(t.name).Set(float64(waitingRows))
		r.metrics.tableDead.WithLabelValues(t.name).Set(float64(dead))
		allWaiting += waitingRows
		allDead += dead
	}
	r.metrics.waitingRows.Store(allWaiting)
	r.metrics.deadLetters.Set(float64(allDead))
	return nil
}

// readSlotStats updates the slot gauges; it returns the confirmed LSN and the lag.
func (r *Relay) readSlotStats(ctx context.Context, pool *pgxpool.Pool) (string, int64, error) {
	var active bool
	var walStatus, confirmed *string
	var safe, confirmedLag, restartLag *int64
	// On a standby the WAL's end is what it has replayed.
	err := pool.QueryRow(ctx, `WITH w AS (SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()
			ELSE pg_current_wal_lsn() END AS lsn)
		SELECT active, wal_status, safe_wal_size,
			pg_wal_lsn_diff(w.lsn, confirmed_flush_lsn)::bigint,
			pg_wal_lsn_diff(w.lsn, restart_lsn)::bigint, confirmed_flush_lsn::text
		FROM pg_replication_slots, w WHERE slot_name = $1`, r.cfg.Slot).
		Scan(&active, &walStatus, &safe, &confirmedLag, &restartLag, &confirmed)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, nil // not created yet
	}
	if err != nil {
		return "", 0, err
	}
	slot := r.cfg.Slot
	r.metrics.slotActive.WithLabelValues(slot).Set(boolFloat(active))
	for _, st := range walStatuses {
		r.metrics.slotWALStatus.WithLabelValues(slot, st).Set(boolFloat(walStatus != nil && *walStatus == st))
	}
	if safe != nil {
		r.metrics.slotSafeWAL.WithLabelValues(slot).Set(float64(*safe))
	}
	var lag int64
	if confirmedLag != nil {
		lag = *confirmedLag
		r.metrics.slotConfirmedLag.WithLabelValues(slot).Set(float64(lag))
	}
	if restartLag != nil {
		r.metrics.slotRestartLag.WithLabelValues(slot).Set(float64(*restartLag))
	}
	var lsn string
	if confirmed != nil {
		lsn = *confirmed
	}
	return lsn, lag, nil
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
