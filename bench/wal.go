package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The WAL a relay causes (marks, deletes, progress records, bookkeeping, the
// autovacuum they bring) is the server's WAL position moving while the relay drains a
// backlog that was written before it started: nothing else writes to the database
// meanwhile. It is counted from the relay's start until walAfterConfirm after the slot
// confirmed the backlog's last transaction, so that what the relay writes once per
// status interval is counted too.
const walAfterConfirm = 10 * time.Second

// walAccount is what a drain added to the WAL beside the inserts.
type walAccount struct {
	InsertBytes int64 `json:"insert_wal_bytes"` // the backlog's own inserts
	RelayBytes  int64 `json:"relay_wal_bytes"`  // relay start to walAfterConfirm after the last confirm
	// Removal is the WAL written after that while the relay retires rows (deletes
	// them or drops their partitions), if the mode removes rows after publishing;
	// RemovalChecked is false when the mode does not (mark, none).
	RemovalChecked bool    `json:"removal_checked"`
	RemovalBytes   int64   `json:"removal_wal_bytes"`
	RemovalSeconds float64 `json:"removal_seconds"`
	RowsLeft       int64   `json:"rows_left"` // outbox rows when removal was last checked
}

// RelayShare is the relay's WAL as a fraction of the inserts'.
func (w walAccount) RelayShare() float64 {
	if w.InsertBytes <= 0 {
		return 0
	}
	return float64(w.RelayBytes) / float64(w.InsertBytes)
}

func walPosition(ctx context.Context, conn *pgx.Conn) (int64, error) {
	_, n, err := currentLSN(ctx, conn)
	return n, err
}

// waitConfirmedPast waits until slot's confirmed_flush_lsn is past lsn: the relay
// confirmed a transaction that committed after lsn was read.
func waitConfirmedPast(ctx context.Context, conn *pgx.Conn, slot string, lsn int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		confirmed, err := slotConfirmed(ctx, conn, slot)
		if err != nil {
			return err
		}
		if confirmed > lsn {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("slot %s confirmed only %d of %d bytes within %s", slot, confirmed, lsn, timeout)
		}
		if err := pause(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// slotConfirmed returns slot's confirmed_flush_lsn as a number (0: none yet).
func slotConfirmed(ctx context.Context, conn *pgx.Conn, slot string) (int64, error) {
	var confirmed int64
	err := conn.QueryRow(ctx, `SELECT COALESCE(pg_wal_lsn_diff(confirmed_flush_lsn, '0/0'), 0)::bigint
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&confirmed)
	if err != nil {
		return 0, fmt.Errorf("read confirmed lsn of slot %s: %w", slot, err)
	}
	return confirmed, nil
}

// measureRemoval waits up to wait for the outbox table to hold no rows and returns
// the WAL written from from until then.
func measureRemoval(ctx context.Context, conn *pgx.Conn, from int64, wait time.Duration) (bytes int64, seconds float64, left int64, err error) {
	began := time.Now()
	for {
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox_events").Scan(&left); err != nil {
			return 0, 0, 0, fmt.Errorf("count outbox rows: %w", err)
		}
		if left == 0 || time.Since(began) >= wait {
			break
		}
		if err := pause(ctx, 250*time.Millisecond); err != nil {
			return 0, 0, 0, err
		}
	}
	now, err := walPosition(ctx, conn)
	if err != nil {
		return 0, 0, 0, err
	}
	return now - from, time.Since(began).Seconds(), left, nil
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// removalText describes the removal of old rows for a progress line.
func removalText(w walAccount) string {
	switch {
	case !w.RemovalChecked:
		return ""
	case w.RowsLeft == 0:
		return fmt.Sprintf("; rows removed, %s more WAL in %.1fs", bytesIEC(w.RemovalBytes), w.RemovalSeconds)
	}
	return fmt.Sprintf("; %d rows still in the table after %.0fs (%s more WAL)", w.RowsLeft, w.RemovalSeconds, bytesIEC(w.RemovalBytes))
}

// removes reports whether a relay with these settings removes old rows after
// publishing them, so that the harness waits for it: every on-publish value but mark
// and none (which keep them), and any with --retention.
func removes(onPublish string, relayArgs []string) bool {
	for _, a := range relayArgs {
		if strings.HasPrefix(a, "--retention") {
			return true
		}
	}
	return onPublish != "mark" && onPublish != "none"
}
