package catalog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrSlotRecreated: while this relay ran a slot's catch-up pass, another instance
// created the slot again; the pass that counts is that instance's.
var ErrSlotRecreated = errors.New("the slot was created again by another instance during this catch-up pass")

// ErrNotSlotOwner: the slot's incarnation is not the one this relay streams (another
// instance created the slot again), or its catch-up pass has not finished.
var ErrNotSlotOwner = errors.New("this relay does not own the slot's current incarnation, or its catch-up pass has not finished")

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
// finished, and that it covered tables (docs/design.md invariant 10). It fails with
// ErrSlotRecreated when the slot has been created again since: a deposed leader must
// not mark the new leader's pass done (docs/design.md invariant 2).
func MarkCatchupDone(ctx context.Context, conn *pgx.Conn, slot string, created time.Time, tables []string) error {
	tag, err := conn.Exec(ctx, `WITH done AS (
			UPDATE walrelay_slots SET catchup_done_at = now() WHERE slot_name = $1 AND created_at = $2 RETURNING slot_name)
		, covered AS (`+markCovered+` AND EXISTS (SELECT 1 FROM done))
		SELECT FROM done`, slot, created, tables)
	if err != nil {
		return fmt.Errorf("record catch-up done for slot %s: %w", slot, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("record catch-up done for slot %s: %w", slot, ErrSlotRecreated)
	}
	return nil
}

// AdoptSlot records a slot walrelay did not create (Debezium's, or one made by
// hand) as walrelay's, with the adoption time as its incarnation and tables as
// covered: the slot's past, every transaction before its confirmed position, was its
// creator's to publish, and walrelay reads on from there. It returns the incarnation.
func AdoptSlot(ctx context.Context, conn *pgx.Conn, slot string, tables []string) (time.Time, error) {
	var created time.Time
	err := conn.QueryRow(ctx, `INSERT INTO walrelay_slots (slot_name, created_at, catchup_done_at)
		VALUES ($1, clock_timestamp(), clock_timestamp()) RETURNING created_at`, slot).Scan(&created)
	if err != nil {
		return time.Time{}, fmt.Errorf("adopt slot %s: %w", slot, err)
	}
	if err := MarkCovered(ctx, conn, slot, created, tables); err != nil {
		return time.Time{}, fmt.Errorf("adopt slot %s: %w", slot, err)
	}
	return created, nil
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

// TakeHorizon takes a candidate published horizon: the xmin of a snapshot, then the
// WAL insert position. One statement, so the snapshot (taken when it starts) comes
// first: a transaction below its xmin had left the ProcArray, after inserting its
// commit record, so that record ends before the insert position read afterwards.
// Once the confirmed LSN reaches that position, every such transaction was
// published (docs/design.md invariant 10).
func TakeHorizon(ctx context.Context, q execer) (Published, error) {
	var xid int64
	var lsn string
	if err := q.QueryRow(ctx, "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint, pg_current_wal_insert_lsn()::text").
		Scan(&xid, &lsn); err != nil {
		return Published{}, fmt.Errorf("take published horizon: %w", err)
	}
	at, err := pglogrepl.ParseLSN(lsn)
	if err != nil {
		return Published{}, fmt.Errorf("take published horizon: %w", err)
	}
	return Published{XID: uint64(xid), LSN: at}, nil
}

// HasHorizons reports whether the database keeps published horizons as this walrelay
// does: migration 7's walrelay_progress table and the functions of the derived rule,
// and migration 8's owners of tables and horizons.
func HasHorizons(ctx context.Context, q execer) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, `SELECT to_regclass('walrelay_progress') IS NOT NULL
		AND to_regproc('walrelay_full_xid') IS NOT NULL AND to_regproc('walrelay_published') IS NOT NULL
		AND to_regclass('walrelay_table_slots') IS NOT NULL AND to_regproc('walrelay_system_id') IS NOT NULL`).Scan(&ok)
	return ok, err
}

// Published is a published horizon: every transaction with an xid below XID had
// finished, with its commit record before LSN, and the relay confirmed LSN.
type Published struct {
	XID uint64 // a full (64-bit) xid, pg_snapshot_xmin of the snapshot taken
	LSN pglogrepl.LSN
}

// execer runs one statement; a *pgx.Conn and a *pgxpool.Pool both do.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// RecordPublished records p as the published horizon of the slot's tables
// (schema-qualified names) that a catch-up pass of the slot covered, for the slot's
// incarnation created at created, with where it was recorded and by which
// transaction, and never lowers one that speaks for this database. It fails with
// ErrNotSlotOwner when that incarnation is no longer the slot's, or its catch-up pass
// has not finished: a deposed leader must not speak for a slot it no longer owns
// (docs/design.md invariant 10).
func RecordPublished(ctx context.Context, q execer, slot string, created time.Time, p Published, tables []string) error {
	_, err := RecordPublishedBy(ctx, q, slot, created, p, tables)
	return err
}

// RecordPublishedBy is RecordPublished that also returns the full xid of the
// transaction that wrote the horizon (0 when it wrote none), so that a recorder can
// tell a horizon that moved only past its own writes.
func RecordPublishedBy(ctx context.Context, q execer, slot string, created time.Time, p Published, tables []string) (uint64, error) {
	var by int64
	err := q.QueryRow(ctx, `INSERT INTO walrelay_progress AS p (slot_name, table_oid, slot_created_at, published_xid,
			confirmed_lsn, recorded_at, system_id, database_oid, recorded_xid)
		SELECT $1, c.table_oid, $2, $3::text::xid8, $4::text::pg_lsn, now(), walrelay_system_id(), walrelay_database_oid(),
			pg_current_xact_id()
		FROM unnest($5::text[]) t JOIN walrelay_table_slots c ON c.table_oid = t::regclass::oid
		WHERE c.slot_name = $1 AND c.covered_at IS NOT NULL
			AND EXISTS (SELECT 1 FROM walrelay_slots s
				WHERE s.slot_name = $1 AND s.created_at = $2 AND s.catchup_done_at IS NOT NULL)
		ON CONFLICT (slot_name, table_oid) DO UPDATE SET slot_created_at = EXCLUDED.slot_created_at,
			published_xid = EXCLUDED.published_xid, confirmed_lsn = EXCLUDED.confirmed_lsn, recorded_at = EXCLUDED.recorded_at,
			system_id = EXCLUDED.system_id, database_oid = EXCLUDED.database_oid, recorded_xid = EXCLUDED.recorded_xid
		WHERE p.published_xid < EXCLUDED.published_xid OR NOT `+recordedHere+`
		RETURNING p.recorded_xid::text::bigint`,
		slot, created, strconv.FormatUint(p.XID, 10), p.LSN.String(), tables).Scan(&by)
	if err == nil {
		return uint64(by), nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("record published horizon of slot %s: %w", slot, err)
	}
	var current, done *time.Time
	err = q.QueryRow(ctx, "SELECT created_at, catchup_done_at FROM walrelay_slots WHERE slot_name = $1", slot).Scan(&current, &done)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, fmt.Errorf("record published horizon of slot %s: walrelay_slots has no row for the slot (deleted?): %w", slot, ErrNotSlotOwner)
	case err != nil:
		return 0, fmt.Errorf("record published horizon of slot %s: %w", slot, err)
	case !current.Equal(created):
		return 0, fmt.Errorf("record published horizon of slot %s: another instance created the slot again at %s: %w",
			slot, current.UTC().Format(time.RFC3339Nano), ErrNotSlotOwner)
	case done == nil:
		return 0, fmt.Errorf("record published horizon of slot %s: its catch-up pass has not finished: %w", slot, ErrNotSlotOwner)
	}
	return 0, nil // already as far or further, or no table covered yet
}

// ReadPublished returns the slot's published horizon of table where it speaks for
// this database (xid 0 when none), through q: a catch-up pass reads it in its
// snapshot.
func ReadPublished(ctx context.Context, q execer, slot, table string) (uint64, error) {
	var xid *int64
	err := q.QueryRow(ctx, `SELECT max(p.published_xid::text::bigint) FROM walrelay_progress p
		WHERE p.slot_name = $1 AND p.table_oid = $2::regclass AND `+recordedHere, slot, table).Scan(&xid)
	if err != nil {
		return 0, fmt.Errorf("read published horizon of slot %s: %w", slot, err)
	}
	if xid == nil {
		return 0, nil
	}
	return uint64(*xid), nil
}

// ReadReplaced returns when walrelay last found the slot lost or missing and created
// it again, and why (nil: never, or walrelay_slots has no row for the slot).
func ReadReplaced(ctx context.Context, q Querier, slot string) (at *time.Time, reason string, err error) {
	err = q.QueryRow(ctx, "SELECT replaced_at, coalesce(replaced_reason, '') FROM walrelay_slots WHERE slot_name = $1", slot).
		Scan(&at, &reason)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "", nil
	}
	return at, reason, err
}

// LastHorizonAt returns when a published horizon of the slot was last recorded (nil:
// never).
func LastHorizonAt(ctx context.Context, q Querier, slot string) (*time.Time, error) {
	var at *time.Time
	err := q.QueryRow(ctx, "SELECT max(recorded_at) FROM walrelay_progress WHERE slot_name = $1", slot).Scan(&at)
	return at, err
}
