package catalog

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// recordedHere is the SQL condition that walrelay_progress row p speaks for this
// database: recorded in this cluster and database, or still with the xmin of the
// transaction that wrote it (migration 8).
const recordedHere = "walrelay_recorded_here(p.system_id, p.database_oid, p.recorded_xid, p.xmin)"

// Claim is what ClaimTables found for the slot's tables.
type Claim struct {
	// Uncovered lists the tables (as given) that no catch-up pass of the slot has
	// covered: they joined the slot's list, or came back to it, since its last pass,
	// and hold rows the slot's stream never carried.
	Uncovered []string
}

// ClaimTables makes slot the one slot that streams each of tables (docs/design.md
// invariant 10): a row's hand-over to the poller (retry_after, attempts,
// processed_at) has room for one destination, so a table another slot streams is
// refused with a *SetupError that says what to do. The claim is a row keyed by the
// table's OID, so two relays claiming one table at the same moment are serialised by
// its primary key. The slot's claims on tables it no longer lists lose their
// coverage: its stream skips their inserts from now on.
func ClaimTables(ctx context.Context, conn *pgx.Conn, slot string, tables []string) (Claim, error) {
	_, err := conn.Exec(ctx, `INSERT INTO walrelay_table_slots (table_oid, slot_name)
		SELECT t::regclass::oid, $1 FROM unnest($2::text[]) t ON CONFLICT (table_oid) DO NOTHING`, slot, tables)
	if err != nil { // a database without migration 8 is refused before (HasHorizons)
		return Claim{}, fmt.Errorf("claim the outbox tables for slot %s: %w", slot, err)
	}
	var claim Claim
	for _, table := range tables {
		var owner string
		var covered *time.Time
		var ownerExists bool
		if err := conn.QueryRow(ctx, `SELECT c.slot_name, c.covered_at,
				EXISTS (SELECT 1 FROM pg_replication_slots r WHERE r.slot_name = c.slot_name)
			FROM walrelay_table_slots c WHERE c.table_oid = $1::regclass::oid`, table).Scan(&owner, &covered, &ownerExists); err != nil {
			return Claim{}, fmt.Errorf("read the slot of outbox table %s: %w", table, err)
		}
		if owner != slot {
			return Claim{}, secondSlot(table, slot, owner, ownerExists)
		}
		if covered == nil {
			claim.Uncovered = append(claim.Uncovered, table)
		}
	}
	if _, err := conn.Exec(ctx, `UPDATE walrelay_table_slots SET covered_at = NULL
		WHERE slot_name = $1 AND covered_at IS NOT NULL
		AND table_oid <> ALL (SELECT t::regclass::oid FROM unnest($2::text[]) t)`, slot, tables); err != nil {
		return Claim{}, fmt.Errorf("record the tables slot %s no longer streams: %w", slot, err)
	}
	return claim, nil
}

// secondSlot is the refusal of a second slot on a table, with what to do.
func secondSlot(table, slot, owner string, ownerExists bool) error {
	release := fmt.Sprintf("DELETE FROM walrelay_table_slots WHERE slot_name = '%s' AND table_oid = '%s'::regclass", owner, table)
	if ownerExists {
		return setupErrorf("outbox table %s is streamed by slot %s; walrelay streams a table through one slot only, "+
			"since a row's hand-over to the poller (retry_after, attempts, processed_at) has room for one destination. "+
			"Run this relay with --slot %s (its instances share the slot and take over from each other), or, to move "+
			"the table to slot %s, stop the relay of slot %s, drop that slot (SELECT pg_drop_replication_slot('%s')) "+
			"and run %s", table, owner, owner, slot, owner, owner, release)
	}
	return setupErrorf("outbox table %s is streamed by slot %s, which does not exist at the moment (its relay is "+
		"creating it, or creates it again, with a catch-up pass, when it next starts); walrelay streams a table through "+
		"one slot only, since a row's hand-over to the poller has room for one destination. Run this relay with "+
		"--slot %s, or, if no relay will run slot %s again, release the table: %s", table, owner, owner, owner, release)
}

// markCovered is the SQL that records the tables ($3, text[]) as covered by the
// pass of slot $1's incarnation created at $2, when that incarnation is the slot's.
const markCovered = `UPDATE walrelay_table_slots c SET covered_at = now()
	FROM walrelay_slots s WHERE s.slot_name = $1 AND s.created_at = $2
	AND c.slot_name = s.slot_name AND c.table_oid IN (SELECT t::regclass::oid FROM unnest($3::text[]) t)`

// MarkCovered records that a catch-up pass of the slot's incarnation created at
// created covered tables: every row they held before the pass's snapshot was
// published (or handed over), so the slot's horizons may speak for them. It fails
// with ErrSlotRecreated when the slot has been created again since.
func MarkCovered(ctx context.Context, conn *pgx.Conn, slot string, created time.Time, tables []string) error {
	tag, err := conn.Exec(ctx, markCovered, slot, created, tables)
	if err != nil {
		return fmt.Errorf("record the catch-up pass of slot %s: %w", slot, err)
	}
	if tag.RowsAffected() < int64(len(tables)) {
		return fmt.Errorf("record the catch-up pass of slot %s: %w", slot, ErrSlotRecreated)
	}
	return nil
}

// Elsewhere is a published horizon of the slot that does not speak for this
// database: recorded in another cluster or database, and its row written anew since
// (pg_dump and pg_restore, logical replication), so its xids are another database's.
type Elsewhere struct {
	Table    string
	System   string // "" when not known (recorded before migration 8 for a slot walrelay_slots does not know)
	Database uint32
}

// HorizonsElsewhere lists the slot's published horizons that do not speak for this
// database, which every reader of horizons ignores.
func HorizonsElsewhere(ctx context.Context, q Querier, slot string) ([]Elsewhere, error) {
	rows, err := q.Query(ctx, `SELECT p.table_oid::regclass::text,
			coalesce(p.system_id, ''), coalesce(p.database_oid, 0)
		FROM walrelay_progress p WHERE p.slot_name = $1 AND NOT `+recordedHere, slot)
	if err != nil {
		return nil, fmt.Errorf("read the published horizons of slot %s: %w", slot, err)
	}
	var out []Elsewhere
	var e Elsewhere
	if _, err := pgx.ForEachRow(rows, []any{&e.Table, &e.System, &e.Database}, func() error {
		out = append(out, e)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read the published horizons of slot %s: %w", slot, err)
	}
	return out, nil
}

// AwaitOlderTransactions waits until every transaction that had an xid when it was
// called has ended, telling waiting how many are left every few seconds: a snapshot
// taken afterwards sees every transaction whose commit record was written before the
// call. Prepared transactions count, as they do for CREATE_REPLICATION_SLOT.
func AwaitOlderTransactions(ctx context.Context, q Querier, waiting func(left int)) error {
	var xmax int64
	if err := q.QueryRow(ctx, "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint").Scan(&xmax); err != nil {
		return fmt.Errorf("read the next xid: %w", err)
	}
	lastReport := time.Now()
	for {
		var left int
		if err := q.QueryRow(ctx, `SELECT count(*) FROM pg_snapshot_xip(pg_current_snapshot()) x
			WHERE x::text::bigint < $1`, xmax).Scan(&left); err != nil {
			return fmt.Errorf("read the running transactions: %w", err)
		}
		if left == 0 {
			return nil
		}
		if time.Since(lastReport) > 10*time.Second {
			waiting(left)
			lastReport = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
