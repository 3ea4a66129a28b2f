package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// RecordConfirmed records lsn, an LSN the relay sent as its confirmed flush position
// on the slot o names, with where it comes from (docs/design.md invariant 8): one row
// per slot (migration 9), moved forward only, and written only while o's incarnation
// is the slot's (walrelay_slots), so a deposed leader of an earlier incarnation
// cannot overwrite its successor's record. It reports whether the row was written.
func RecordConfirmed(ctx context.Context, q execer, o Origin, lsn pglogrepl.LSN) (bool, error) {
	tag, err := q.Exec(ctx, `INSERT INTO walrelay_confirmed AS c (slot_name, slot_created_at, system_id, database_name,
			timeline, confirmed_lsn, recorded_at)
		SELECT $1, $2, $3, $4, $5, $6::text::pg_lsn, now()
		WHERE EXISTS (SELECT 1 FROM walrelay_slots s WHERE s.slot_name = $1 AND s.created_at = $2)
		ON CONFLICT (slot_name) DO UPDATE SET slot_created_at = EXCLUDED.slot_created_at,
			system_id = EXCLUDED.system_id, database_name = EXCLUDED.database_name, timeline = EXCLUDED.timeline,
			confirmed_lsn = EXCLUDED.confirmed_lsn, recorded_at = EXCLUDED.recorded_at
		WHERE c.confirmed_lsn < EXCLUDED.confirmed_lsn
			OR (c.slot_created_at, c.system_id, c.database_name, c.timeline)
				IS DISTINCT FROM (EXCLUDED.slot_created_at, EXCLUDED.system_id, EXCLUDED.database_name, EXCLUDED.timeline)`,
		o.Slot, o.SlotCreated, o.System, o.Database, o.Timeline, lsn.String())
	if err != nil {
		return false, fmt.Errorf("record the confirmed position %s of slot %s: %w", lsn, o.Slot, err)
	}
	return tag.RowsAffected() > 0, nil
}

// ReadConfirmed returns the slot's recorded confirmed position and where it was
// recorded; ok is false when there is none.
func ReadConfirmed(ctx context.Context, q execer, slot string) (o Origin, lsn pglogrepl.LSN, ok bool, err error) {
	var at string
	var created time.Time
	err = q.QueryRow(ctx, `SELECT slot_created_at, system_id, database_name, timeline, confirmed_lsn::text
		FROM walrelay_confirmed WHERE slot_name = $1`, slot).Scan(&created, &o.System, &o.Database, &o.Timeline, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return Origin{}, 0, false, nil
	}
	if err != nil {
		return Origin{}, 0, false, fmt.Errorf("read the recorded confirmed position of slot %s: %w", slot, err)
	}
	if lsn, err = pglogrepl.ParseLSN(at); err != nil {
		return Origin{}, 0, false, fmt.Errorf("read the recorded confirmed position of slot %s: %w", slot, err)
	}
	o.Slot, o.SlotCreated = slot, created
	return o, lsn, true, nil
}

// HasConfirmedRecord reports whether the database keeps the confirmed position a
// relay records (migration 9).
func HasConfirmedRecord(ctx context.Context, q execer) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, "SELECT to_regclass('walrelay_confirmed') IS NOT NULL").Scan(&ok)
	return ok, err
}
