package replication

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	// The other tables' identities belong to the slot's last incarnation too. The column
	// exists from migration 6 on; a single-table relay does without it.
	if _, err := conn.Exec(ctx, `DO $$ BEGIN
			IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('walrelay_slots')
				AND attname = 'table_oids' AND NOT attisdropped) THEN
				UPDATE walrelay_slots SET table_oids = NULL WHERE slot_name = `+quoteLiteral(slot)+`;
			END IF;
		END $$`); err != nil {
		return time.Time{}, fmt.Errorf("record slot %s: %w", slot, err)
	}
	return created, nil
}

// quoteLiteral quotes s as an SQL string literal (DO blocks take no parameters).
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

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

// Streamed is where a slot was last streamed: the cluster's system identifier and
// the timeline.
type Streamed struct {
	System   string
	Timeline int32
}

// RecordStreamed records that the slot streams on the server o names.
func RecordStreamed(ctx context.Context, conn *pgx.Conn, o Origin) error {
	_, err := conn.Exec(ctx, `UPDATE walrelay_slots SET system_id = $2, timeline = $3
		WHERE slot_name = $1 AND (system_id IS DISTINCT FROM $2 OR timeline IS DISTINCT FROM $3)`,
		o.Slot, o.System, o.Timeline)
	if err != nil {
		return fmt.Errorf("record where slot %s streams: %w", o.Slot, err)
	}
	return nil
}

// RecordReplaced records when and why the slot had to be replaced, for `walrelay
// status`; the row outlives the replacement.
func RecordReplaced(ctx context.Context, conn *pgx.Conn, slot, reason string) error {
	_, err := conn.Exec(ctx, "UPDATE walrelay_slots SET replaced_at = now(), replaced_reason = $2 WHERE slot_name = $1",
		slot, reason)
	if err != nil {
		return fmt.Errorf("record the replacement of slot %s: %w", slot, err)
	}
	return nil
}

// readSlotRecord fills in what walrelay_slots says about the slot: whether walrelay
// created it, when, whether its catch-up pass finished, and where it last streamed.
func readSlotRecord(ctx context.Context, conn *pgx.Conn, slot string, st *SlotState) error {
	var done *time.Time
	var system *string
	var timeline *int32
	err := conn.QueryRow(ctx, "SELECT created_at, catchup_done_at, system_id, timeline FROM walrelay_slots WHERE slot_name = $1", slot).
		Scan(&st.Created, &done, &system, &timeline)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		st.CatchupState = CatchupUnknown
		return nil
	case err != nil:
		return fmt.Errorf("read catch-up state of slot %s: %w", slot, err)
	case done == nil:
		st.CatchupState = CatchupPending
	default:
		st.CatchupState = CatchupDone
	}
	if system != nil && timeline != nil {
		st.StreamedOn = Streamed{System: *system, Timeline: *timeline}
	}
	return nil
}
