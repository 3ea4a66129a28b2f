package replication

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrSlotRecreated: while this relay ran a slot's catch-up pass, another instance
// created the slot again; the pass that counts is that instance's.
var ErrSlotRecreated = errors.New("the slot was created again by another instance during this catch-up pass")

// RecordSlot records in walrelay_slots that the slot is being created and its
// catch-up pass has not finished, and returns the creation time that identifies this
// incarnation of the slot.
func RecordSlot(ctx context.Context, conn *pgx.Conn, slot string) (time.Time, error) {
	var created time.Time
	err := conn.QueryRow(ctx, `INSERT INTO walrelay_slots (slot_name, created_at) VALUES ($1, clock_timestamp())
		ON CONFLICT (slot_name) DO UPDATE SET created_at = EXCLUDED.created_at, catchup_done_at = NULL, table_oid = NULL
		RETURNING created_at`, slot).Scan(&created)
	if err != nil {
		return time.Time{}, fmt.Errorf("record slot %s: %w", slot, err)
	}
	return created, nil
}

// MarkCatchupDone records that the catch-up pass of the slot created at created
// finished. It fails with ErrSlotRecreated when the slot has been created again since:
// a deposed leader must not mark the new leader's pass done (docs/design.md
// invariant 2).
func MarkCatchupDone(ctx context.Context, conn *pgx.Conn, slot string, created time.Time) error {
	tag, err := conn.Exec(ctx, "UPDATE walrelay_slots SET catchup_done_at = now() WHERE slot_name = $1 AND created_at = $2",
		slot, created)
	if err != nil {
		return fmt.Errorf("record catch-up done for slot %s: %w", slot, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("record catch-up done for slot %s: %w", slot, ErrSlotRecreated)
	}
	return nil
}

// catchupState reads whether walrelay created the slot, when, and whether its
// catch-up pass finished.
func catchupState(ctx context.Context, conn *pgx.Conn, slot string) (CatchupState, time.Time, error) {
	var created time.Time
	var done *time.Time
	err := conn.QueryRow(ctx, "SELECT created_at, catchup_done_at FROM walrelay_slots WHERE slot_name = $1", slot).
		Scan(&created, &done)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return CatchupUnknown, time.Time{}, nil
	case err != nil:
		return CatchupUnknown, time.Time{}, fmt.Errorf("read catch-up state of slot %s: %w", slot, err)
	case done == nil:
		return CatchupPending, created, nil
	default:
		return CatchupDone, created, nil
	}
}
