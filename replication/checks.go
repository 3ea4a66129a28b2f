package replication

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// SetupError is a problem with the database setup that retrying cannot fix: the
// message says what to change. The relay exits on it instead of reconnecting.
type SetupError struct{ Msg string }

func (e *SetupError) Error() string { return e.Msg }

func setupErrorf(format string, args ...any) error {
	return &SetupError{Msg: fmt.Sprintf(format, args...)}
}

// RequiredColumns are the outbox columns the relay reads.
var RequiredColumns = []string{"id", "aggregate_type", "aggregate_id", "event_type", "payload", "created_at"}

// SlotState is what the server knows about the relay's slot.
type SlotState struct {
	Exists       bool
	Confirmed    pglogrepl.LSN
	WALStatus    string
	CatchupState CatchupState
	// Created is when walrelay last created the slot (zero: not created by walrelay).
	// It tells one incarnation of a slot name from the next.
	Created time.Time
	// Failover: a failover slot (PostgreSQL 17+), which standbys can keep a copy of.
	Failover bool
	// StreamedOn is the system identifier and timeline the slot was last streamed
	// on, as walrelay_slots recorded them (empty: never recorded).
	StreamedOn Streamed
}

// CatchupState says whether the slot's catch-up pass finished.
type CatchupState int

const (
	// CatchupUnknown: the slot was not created by walrelay (no bookkeeping row); it is
	// taken as it is.
	CatchupUnknown CatchupState = iota
	// CatchupPending: walrelay created the slot but did not finish publishing the rows
	// its snapshot saw; the slot must be created again.
	CatchupPending
	// CatchupDone: every row committed before the slot was published.
	CatchupDone
)

// Lost reports a slot PostgreSQL invalidated: it removed WAL the slot needed
// (max_slot_wal_keep_size), so the slot can never stream again.
func (s SlotState) Lost() bool { return s.Exists && s.WALStatus == "lost" }

// SplitTable splits "schema.table" (default schema public).
func SplitTable(table string) (schema, name string) {
	if s, n, ok := strings.Cut(table, "."); ok {
		return s, n
	}
	return "public", table
}

// Preflight checks, on a regular connection, everything the stream needs, and
// creates the publication when it is missing. Problems come back as *SetupError
// naming the fix.
func Preflight(ctx context.Context, conn *pgx.Conn, table, publication, slot string) (SlotState, error) {
	if err := CheckServer(ctx, conn); err != nil {
		return SlotState{}, err
	}
	if err := CheckTable(ctx, conn, table); err != nil {
		return SlotState{}, err
	}
	if err := ensurePublication(ctx, conn, table, publication); err != nil {
		return SlotState{}, err
	}
	return slotState(ctx, conn, slot)
}

// CheckServer checks that the server can stream: wal_level = logical, and a role
// with the REPLICATION attribute.
func CheckServer(ctx context.Context, conn *pgx.Conn) error {
	var walLevel string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&walLevel); err != nil {
		return fmt.Errorf("read wal_level: %w", err)
	}
	if walLevel != "logical" {
		return setupErrorf("wal_level is %s; set wal_level = logical in postgresql.conf "+
			"(or ALTER SYSTEM SET wal_level = logical) and restart PostgreSQL", walLevel)
	}

	var role string
	var canReplicate bool
	if err := conn.QueryRow(ctx,
		"SELECT rolname, rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user",
	).Scan(&role, &canReplicate); err != nil {
		return fmt.Errorf("read role attributes: %w", err)
	}
	if !canReplicate {
		return setupErrorf("role %s lacks the REPLICATION attribute; as a superuser run "+
			"ALTER ROLE %s WITH REPLICATION (or use --mode poll)", role, pgx.Identifier{role}.Sanitize())
	}
	return nil
}

// CheckTable checks that the outbox table exists with the columns the relay reads.
func CheckTable(ctx context.Context, conn *pgx.Conn, table string) error {
	schema, name := SplitTable(table)
	ident := pgx.Identifier{schema, name}.Sanitize()
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", ident).Scan(&exists); err != nil {
		return fmt.Errorf("look up table %s: %w", table, err)
	}
	if !exists {
		return setupErrorf("table %s does not exist; run `walrelay migrate` to create it "+
			"(or point --table at your outbox table)", table)
	}
	rows, err := conn.Query(ctx,
		"SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped", ident)
	if err != nil {
		return fmt.Errorf("read columns of %s: %w", table, err)
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("read columns of %s: %w", table, err)
	}
	for _, col := range RequiredColumns {
		found := false
		for _, h := range have {
			found = found || h == col
		}
		if !found {
			return setupErrorf("table %s lacks required column %q; run `walrelay migrate` "+
				"or add the column (required: %s)", table, col, strings.Join(RequiredColumns, ", "))
		}
	}
	var bookkeeping bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute
		WHERE attrelid = to_regclass('walrelay_slots') AND attname = 'replaced_reason' AND NOT attisdropped)`).Scan(&bookkeeping); err != nil {
		return fmt.Errorf("look up walrelay_slots: %w", err)
	}
	if !bookkeeping {
		return setupErrorf("table walrelay_slots is missing or older than this walrelay; run `walrelay migrate`")
	}
	return nil
}

func ensurePublication(ctx context.Context, conn *pgx.Conn, table, publication string) error {
	schema, name := SplitTable(table)
	var allTables, inserts bool
	err := conn.QueryRow(ctx, "SELECT puballtables, pubinsert FROM pg_publication WHERE pubname = $1",
		publication).Scan(&allTables, &inserts)
	if errors.Is(err, pgx.ErrNoRows) {
		_, err = conn.Exec(ctx, "CREATE PUBLICATION "+pgx.Identifier{publication}.Sanitize()+
			" FOR TABLE "+pgx.Identifier{schema, name}.Sanitize()+" WITH (publish = 'insert')")
		if err != nil {
			return fmt.Errorf("create publication %s: %w", publication, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up publication %s: %w", publication, err)
	}
	if !inserts {
		return setupErrorf("publication %s does not publish inserts; run ALTER PUBLICATION %s SET (publish = 'insert')",
			publication, publication)
	}
	if allTables {
		return nil
	}
	var included bool
	if err := conn.QueryRow(ctx,
		"SELECT EXISTS (SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3)",
		publication, schema, name).Scan(&included); err != nil {
		return fmt.Errorf("read tables of publication %s: %w", publication, err)
	}
	if !included {
		return setupErrorf("publication %s does not include table %s; run ALTER PUBLICATION %s ADD TABLE %s",
			publication, table, publication, table)
	}
	return nil
}

func slotState(ctx context.Context, conn *pgx.Conn, slot string) (SlotState, error) {
	var st SlotState
	var plugin, database, walStatus *string
	var confirmed *string
	var ourDatabase string
	var failover *bool
	err := conn.QueryRow(ctx, `SELECT s.plugin, s.database, s.wal_status, s.confirmed_flush_lsn::text, current_database(),
			(to_jsonb(s) ->> 'failover')::bool
		FROM pg_replication_slots s WHERE s.slot_name = $1`, slot).
		Scan(&plugin, &database, &walStatus, &confirmed, &ourDatabase, &failover)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// Missing: the bookkeeping row still tells a slot that was never created from
		// one that disappeared (docs/design.md invariant 9).
		err = readSlotRecord(ctx, conn, slot, &st)
		return st, err
	case err != nil:
		return st, fmt.Errorf("look up replication slot %s: %w", slot, err)
	}
	st.Exists = true
	st.Failover = failover != nil && *failover
	if plugin == nil || *plugin != "pgoutput" {
		return st, setupErrorf("replication slot %s exists but is not a pgoutput logical slot; "+
			"choose another --slot or drop it with SELECT pg_drop_replication_slot('%s')", slot, slot)
	}
	if database == nil || *database != ourDatabase {
		return st, setupErrorf("replication slot %s belongs to another database; choose another --slot", slot)
	}
	if walStatus != nil {
		st.WALStatus = *walStatus
	}
	if st.WALStatus == "lost" {
		return st, nil // the caller replaces it
	}
	if confirmed != nil {
		if st.Confirmed, err = pglogrepl.ParseLSN(*confirmed); err != nil {
			return st, fmt.Errorf("parse confirmed_flush_lsn of %s: %w", slot, err)
		}
	}
	return st, readSlotRecord(ctx, conn, slot, &st)
}

// SenderTimeout returns the server's wal_sender_timeout for this connection (0: none).
func (c *Conn) SenderTimeout(ctx context.Context) (time.Duration, error) {
	results, err := c.pg.Exec(ctx, "SHOW wal_sender_timeout").ReadAll()
	if err != nil {
		return 0, fmt.Errorf("read wal_sender_timeout: %w", err)
	}
	if len(results) != 1 || len(results[0].Rows) != 1 || len(results[0].Rows[0]) != 1 {
		return 0, errors.New("read wal_sender_timeout: unexpected result")
	}
	return parsePGDuration(string(results[0].Rows[0][0]))
}

// parsePGDuration parses a duration GUC as SHOW prints it: "60s", "500ms", "1min", "0".
func parsePGDuration(s string) (time.Duration, error) {
	units := []struct {
		suffix string
		unit   time.Duration
	}{{"ms", time.Millisecond}, {"min", time.Minute}, {"s", time.Second}, {"h", time.Hour}, {"d", 24 * time.Hour}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			var n int64
			if _, err := fmt.Sscanf(num, "%d", &n); err != nil {
				return 0, fmt.Errorf("parse duration %q: %w", s, err)
			}
			return time.Duration(n) * u.unit, nil
		}
	}
	var n int64
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil {
		return 0, fmt.Errorf("parse duration %q: %w", s, err)
	}
	return time.Duration(n) * time.Millisecond, nil
}
