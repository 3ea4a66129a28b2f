package catalog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/outbox"
)

// SetupError is a problem with the database setup that retrying cannot fix: the
// message says what to change. The relay exits on it instead of reconnecting.
type SetupError struct{ Msg string }

func (e *SetupError) Error() string { return e.Msg }

func setupErrorf(format string, args ...any) error {
	return &SetupError{Msg: fmt.Sprintf(format, args...)}
}

// RequiredColumns are the outbox columns the relay reads, with the setting that
// names each: the event type and created_at only when cols names them.
func RequiredColumns(cols outbox.Columns) []struct{ Setting, Name string } {
	req := []struct{ Setting, Name string }{{"column-id", cols.ID}, {"column-aggregate-type", cols.AggregateType},
		{"column-aggregate-id", cols.AggregateID}}
	if cols.EventType != "" {
		req = append(req, struct{ Setting, Name string }{"column-event-type", cols.EventType})
	}
	req = append(req, struct{ Setting, Name string }{"column-payload", cols.Payload})
	if cols.CreatedAt != "" {
		req = append(req, struct{ Setting, Name string }{"column-created-at", cols.CreatedAt})
	}
	return req
}

// Type OIDs of the column types walrelay supports, and what it calls them.
var (
	idTypes        = map[uint32]string{2950: "uuid", 25: "text", 1043: "text", 20: "bigint", 23: "bigint"}
	payloadTypes   = map[uint32]string{3802: "jsonb", 114: "json", 25: "text", 1043: "text", 17: "bytea"}
	createdAtTypes = map[uint32]string{1184: "timestamptz", 1114: "timestamp"}
)

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
	// CatchupUnknown: the slot was not created by walrelay (no bookkeeping row); the
	// relay adopts it (AdoptSlot).
	CatchupUnknown CatchupState = iota
	// CatchupPending: walrelay created the slot but did not record publishing the rows
	// its snapshot saw; the pass must be repeated, beside the slot (its stream carries
	// the table-less events committed since).
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
func Preflight(ctx context.Context, conn *pgx.Conn, table string, cols outbox.Columns, publication, slot string) (SlotState, error) {
	return PreflightTables(ctx, conn, []Table{{Name: table, Columns: cols}}, publication, slot)
}

// Table is one outbox table a slot streams: its name (optionally schema-qualified)
// and its columns.
type Table struct {
	Name    string
	Columns outbox.Columns
}

// PreflightTables is Preflight for a slot that streams several outbox tables through
// one publication, which it creates for all of them when it is missing.
func PreflightTables(ctx context.Context, conn *pgx.Conn, tables []Table, publication, slot string) (SlotState, error) {
	return PreflightStandby(ctx, conn, conn, tables, publication, slot)
}

// PreflightStandby is PreflightTables for a slot on a hot standby, slots, whose
// primary, conn, holds walrelay's bookkeeping: the publication is checked (and
// created) on the primary, the slot is looked up on the standby, and its record is
// read on the primary, which a lagging standby cannot make older than it is. With
// slots and conn the same connection it is PreflightTables.
func PreflightStandby(ctx context.Context, conn, slots *pgx.Conn, tables []Table, publication, slot string) (SlotState, error) {
	if err := CheckServer(ctx, conn); err != nil {
		return SlotState{}, err
	}
	if slots != conn {
		if err := CheckServer(ctx, slots); err != nil {
			return SlotState{}, fmt.Errorf("on the standby: %w", err)
		}
	}
	shapes := make([]Shape, 0, len(tables))
	for _, t := range tables {
		shape, err := CheckTable(ctx, conn, t.Name, t.Columns, publication)
		if err != nil {
			return SlotState{}, err
		}
		shapes = append(shapes, shape)
	}
	if err := ensurePublication(ctx, conn, shapes, publication); err != nil {
		return SlotState{}, err
	}
	return slotState(ctx, slots, conn, slot)
}

// WALLevelAdvice says what to do about a wal_level other than logical, with which no
// slot can be made: the setting, or the mode that needs no replication.
func WALLevelAdvice(walLevel string) string {
	return fmt.Sprintf("wal_level is %s; set wal_level = logical in postgresql.conf "+
		"(or ALTER SYSTEM SET wal_level = logical) and restart PostgreSQL, "+
		"or run with --mode poll, which needs no replication", walLevel)
}

// CheckServer checks that the server can stream: wal_level = logical, and a role
// with the REPLICATION attribute.
func CheckServer(ctx context.Context, conn *pgx.Conn) error {
	var walLevel string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&walLevel); err != nil {
		return fmt.Errorf("read wal_level: %w", err)
	}
	if walLevel != "logical" {
		return setupErrorf("%s", WALLevelAdvice(walLevel))
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

// Bookkeeping are the columns walrelay keeps its state in, on every outbox table:
// what `walrelay migrate` adds (nullable or with a constant default, so the
// application's INSERT keeps working, and each a catalog-only change) and the types
// it accepts in a column that exists (format_type).
var Bookkeeping = []struct {
	Name, DDL string
	Types     []string
}{
	{"attempts", "INT NOT NULL DEFAULT 0", []string{"integer", "smallint", "bigint"}},
	{"processed_at", "TIMESTAMPTZ", []string{"timestamp with time zone"}},
	{"retry_after", "TIMESTAMPTZ", []string{"timestamp with time zone"}},
	{"last_error", "TEXT", []string{"text", "character varying"}},
	{"dead_lettered_at", "TIMESTAMPTZ", []string{"timestamp with time zone"}},
}

// HandOverColumns returns which of the columns that say a row is marked, handed over
// or a dead letter (processed_at, dead_lettered_at, retry_after) the table ident
// (quoted) has: a catch-up pass leaves out the rows that have one set.
func HandOverColumns(ctx context.Context, q Querier, ident string) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT attname FROM pg_attribute
		WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped AND attname IN ('processed_at', 'dead_lettered_at', 'retry_after')`, ident)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// CheckTable checks that the outbox table exists with the columns the relay reads, in
// types it supports, has a unique index on id and walrelay's bookkeeping columns; it
// returns the table's shape, which every statement of the relay is built from. It
// creates nothing: a table walrelay cannot serve is refused before any slot exists.
func CheckTable(ctx context.Context, conn *pgx.Conn, table string, cols outbox.Columns, publication string) (Shape, error) {
	shape, err := DescribeTable(ctx, conn, table, cols)
	if err != nil {
		return shape, err
	}
	if err := checkBookkeeping(ctx, conn, shape, publication); err != nil {
		return shape, err
	}
	var bookkeeping bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute
		WHERE attrelid = to_regclass('walrelay_slots') AND attname = 'replaced_reason' AND NOT attisdropped)`).Scan(&bookkeeping); err != nil {
		return shape, fmt.Errorf("look up walrelay_slots: %w", err)
	}
	if !bookkeeping {
		return shape, setupErrorf("table walrelay_slots is missing or older than this walrelay; run `walrelay migrate`")
	}
	return shape, nil
}

// checkBookkeeping checks that the table has the bookkeeping columns, in types
// walrelay can write, and says which `walrelay migrate` adds them.
func checkBookkeeping(ctx context.Context, q Querier, shape Shape, publication string) error {
	rows, err := q.Query(ctx, `SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped`, shape.Ident())
	if err != nil {
		return fmt.Errorf("read columns of %s: %w", shape.Qualified(), err)
	}
	have := map[string]string{}
	var name, typ string
	if _, err := pgx.ForEachRow(rows, []any{&name, &typ}, func() error { have[name] = typ; return nil }); err != nil {
		return fmt.Errorf("read columns of %s: %w", shape.Qualified(), err)
	}
	var missing, wrong []string
	for _, b := range Bookkeeping {
		switch t, ok := have[b.Name]; {
		case !ok:
			missing = append(missing, b.Name)
		case !slices.Contains(b.Types, t):
			wrong = append(wrong, fmt.Sprintf("%s is %s, walrelay keeps %s in it", b.Name, t, b.DDL))
		}
	}
	switch {
	case len(wrong) > 0:
		return setupErrorf("table %s has bookkeeping columns of other types (%s); rename or retype them, then run %s",
			shape.Qualified(), strings.Join(wrong, "; "), MigrateCommand(shape, publication))
	case len(missing) > 0:
		return setupErrorf("table %s lacks the bookkeeping columns walrelay keeps its state in (%s); run %s as the "+
			"table's owner, which adds them (nullable or defaulted, no rewrite) with the indexes, views and publication, "+
			"or add them by hand (docs/operations.md, \"Bringing your own outbox table\")",
			shape.Qualified(), strings.Join(missing, ", "), MigrateCommand(shape, publication))
	}
	return nil
}

// MigrateCommand is the `walrelay migrate` command line that adopts the table of
// shape for publication: its table and the column settings that differ from the
// defaults (the database URL is the operator's).
func MigrateCommand(shape Shape, publication string) string {
	cmd := "`walrelay migrate --table " + shape.Qualified()
	def, cols := outbox.DefaultColumns(), shape.Columns
	for _, c := range []struct{ flag, value, def string }{
		{"column-id", cols.ID, def.ID}, {"column-aggregate-type", cols.AggregateType, def.AggregateType},
		{"column-aggregate-id", cols.AggregateID, def.AggregateID}, {"column-event-type", cols.EventType, def.EventType},
		{"column-payload", cols.Payload, def.Payload}, {"column-created-at", cols.CreatedAt, def.CreatedAt},
	} {
		switch {
		case c.value == c.def:
		case c.value == "":
			cmd += " --" + c.flag + " ''"
		default:
			cmd += " --" + c.flag + " " + c.value
		}
	}
	if publication != "" && publication != "walrelay" {
		cmd += " --publication " + publication
	}
	return cmd + "`"
}

// Querier is what a connection, a pool and a transaction offer for reading.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// DescribeTable reads the outbox table's shape from the catalog: the types of its
// id, payload and created_at columns, whether it is partitioned, and the columns of
// its unique index on id. A missing column, an unsupported type or no such index is
// a *SetupError saying what to change.
func DescribeTable(ctx context.Context, q Querier, table string, cols outbox.Columns) (Shape, error) {
	schema, name := SplitTable(table)
	shape := Shape{Schema: schema, Name: name, Columns: cols}
	ident := shape.Ident()
	var relkind *string
	if err := q.QueryRow(ctx, "SELECT relkind::text FROM pg_class WHERE oid = to_regclass($1)", ident).Scan(&relkind); err != nil &&
		!errors.Is(err, pgx.ErrNoRows) {
		return shape, fmt.Errorf("look up table %s: %w", table, err)
	}
	if relkind == nil {
		return shape, setupErrorf("table %s does not exist; run `walrelay migrate` to create it "+
			"(or point --table at your outbox table)", table)
	}
	shape.Partitioned = *relkind == "p"
	rows, err := q.Query(ctx, `SELECT attname, atttypid, format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped`, ident)
	if err != nil {
		return shape, fmt.Errorf("read columns of %s: %w", table, err)
	}
	type column struct {
		oid  uint32
		name string
	}
	have := map[string]column{}
	var c column
	var attname string
	if _, err := pgx.ForEachRow(rows, []any{&attname, &c.oid, &c.name}, func() error {
		have[attname] = c
		return nil
	}); err != nil {
		return shape, fmt.Errorf("read columns of %s: %w", table, err)
	}
	required := RequiredColumns(cols)
	var names []string
	for _, r := range required {
		names = append(names, r.Name)
	}
	for _, r := range required {
		if _, ok := have[r.Name]; !ok {
			return shape, setupErrorf("table %s lacks column %q (set by %s); add the column, point %s at the column "+
				"that holds it, or run `walrelay migrate` for walrelay's own table (required: %s)",
				table, r.Name, r.Setting, r.Setting, strings.Join(names, ", "))
		}
	}
	typeOf := func(setting, col string, supported map[uint32]string, list string) (string, error) {
		c := have[col]
		if t, ok := supported[c.oid]; ok {
			return t, nil
		}
		return "", setupErrorf("column %s of table %s has type %s, which walrelay does not support for %s; "+
			"supported: %s. Change the column's type (ALTER TABLE %s ALTER COLUMN %s TYPE ... USING ...) "+
			"or point %s at another column", col, table, c.name, setting, list,
			ident, pgx.Identifier{col}.Sanitize(), setting)
	}
	if shape.IDType, err = typeOf("column-id", cols.ID, idTypes, "uuid, text (or varchar), bigint (or integer)"); err != nil {
		return shape, err
	}
	if shape.PayloadType, err = typeOf("column-payload", cols.Payload, payloadTypes, "jsonb, json, text (or varchar), bytea"); err != nil {
		return shape, err
	}
	if cols.CreatedAt != "" {
		if shape.CreatedAtType, err = typeOf("column-created-at", cols.CreatedAt, createdAtTypes,
			"timestamptz, timestamp (without time zone, read as UTC); or leave column-created-at empty to use the commit time"); err != nil {
			return shape, err
		}
	}
	for _, h := range cols.Headers {
		if _, ok := have[h.Column]; !ok {
			return shape, setupErrorf("table %s lacks column %q, which column-headers places as header %q; add the column "+
				"or take it out of column-headers", table, h.Column, h.Key())
		}
	}
	for _, f := range cols.Envelope {
		if _, ok := have[f.Column]; !ok {
			return shape, setupErrorf("table %s lacks column %q, which column-envelope places as field %q; add the column "+
				"or take it out of column-envelope", table, f.Column, f.Key())
		}
	}
	if cols.Partition != "" {
		if _, ok := have[cols.Partition]; !ok {
			return shape, setupErrorf("table %s lacks column %q (set by column-partition); add the column or leave column-partition empty",
				table, cols.Partition)
		}
	}
	if _, ok := have[cols.Trace]; !ok {
		shape.Columns.Trace = "" // the trace column is read only where it exists
	}
	for _, col := range shape.Columns.Placed() {
		if shape.PlacedTypes == nil {
			shape.PlacedTypes = map[string]string{}
		}
		shape.PlacedTypes[col] = have[col].name
	}
	if shape.Key, err = uniqueKey(ctx, q, ident, table, cols); err != nil {
		return shape, err
	}
	return shape, nil
}

// uniqueKey returns the columns of the unique index on id the bookkeeping's ON
// CONFLICT can name: the primary key when it qualifies, else the smallest. Its
// columns must all be outbox columns the relay writes: (id), or (id, created_at) on
// a table partitioned by created_at.
func uniqueKey(ctx context.Context, q Querier, ident, table string, cols outbox.Columns) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT array(SELECT a.attname::text FROM unnest(i.indkey) WITH ORDINALITY k(attnum, n)
			JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum ORDER BY k.n)
		FROM pg_index i
		WHERE i.indrelid = $1::regclass AND i.indisunique AND i.indisvalid AND i.indpred IS NULL AND i.indexprs IS NULL
		ORDER BY i.indisprimary DESC, i.indnatts`, ident)
	if err != nil {
		return nil, fmt.Errorf("read unique indexes of %s: %w", table, err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[[]string])
	if err != nil {
		return nil, fmt.Errorf("read unique indexes of %s: %w", table, err)
	}
	writes := map[string]bool{cols.ID: true, cols.AggregateType: true, cols.AggregateID: true, cols.EventType: true,
		cols.Payload: true}
	if cols.CreatedAt != "" {
		writes[cols.CreatedAt] = true
	}
	for _, key := range keys {
		ok := slices.Contains(key, cols.ID)
		for _, k := range key {
			ok = ok && writes[k]
		}
		if ok {
			return key, nil
		}
	}
	return nil, setupErrorf("table %s has no unique index on its id column %q that walrelay can use (its bookkeeping "+
		"records failed attempts with INSERT ... ON CONFLICT); add one, e.g. ALTER TABLE %s ADD PRIMARY KEY (%s) "+
		"(on a partitioned table the key must include the partition key, e.g. (%s, created_at), and created_at "+
		"must be mapped with column-created-at)", table, cols.ID, ident, pgx.Identifier{cols.ID}.Sanitize(), pgx.Identifier{cols.ID}.Sanitize())
}

// ensurePublication creates the publication for the tables when it is missing, and
// otherwise checks that it publishes each table's inserts under the table's own
// name: a partitioned table's changes are published as its root's only with
// publish_via_partition_root, otherwise as its partitions', which the decoder would
// take for other tables.
func ensurePublication(ctx context.Context, conn *pgx.Conn, shapes []Shape, publication string) error {
	pub := pgx.Identifier{publication}.Sanitize()
	var allTables, inserts, viaRoot bool
	err := conn.QueryRow(ctx, "SELECT puballtables, pubinsert, pubviaroot FROM pg_publication WHERE pubname = $1",
		publication).Scan(&allTables, &inserts, &viaRoot)
	if errors.Is(err, pgx.ErrNoRows) {
		idents := make([]string, len(shapes))
		for i, s := range shapes {
			idents[i] = s.Ident()
		}
		_, err = conn.Exec(ctx, "CREATE PUBLICATION "+pub+" FOR TABLE "+strings.Join(idents, ", ")+
			" WITH (publish = 'insert', publish_via_partition_root = true)")
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
			publication, pub)
	}
	for _, shape := range shapes {
		if err := checkPublished(ctx, conn, shape, publication, allTables, viaRoot); err != nil {
			return err
		}
	}
	return nil
}

// checkPublished checks that publication publishes shape's inserts under its name.
func checkPublished(ctx context.Context, conn *pgx.Conn, shape Shape, publication string, allTables, viaRoot bool) error {
	table, pub := shape.Qualified(), pgx.Identifier{publication}.Sanitize()
	if shape.Partitioned && !viaRoot {
		return setupErrorf("publication %s publishes partitioned table %s through its partitions, under their own "+
			"names, which walrelay would not recognise; run ALTER PUBLICATION %s SET (publish_via_partition_root = true)",
			publication, table, pub)
	}
	if allTables {
		return nil
	}
	var included bool
	if err := conn.QueryRow(ctx,
		"SELECT EXISTS (SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3)",
		publication, shape.Schema, shape.Name).Scan(&included); err != nil {
		return fmt.Errorf("read tables of publication %s: %w", publication, err)
	}
	if !included {
		return setupErrorf("publication %s does not include table %s; run ALTER PUBLICATION %s ADD TABLE %s",
			publication, table, pub, shape.Ident())
	}
	return nil
}

// slotState looks the slot up on slots, the server it lives on, and its record in
// walrelay_slots on books.
func slotState(ctx context.Context, slots, books *pgx.Conn, slot string) (SlotState, error) {
	conn := slots
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
		err = readSlotRecord(ctx, books, slot, &st)
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
	return st, readSlotRecord(ctx, books, slot, &st)
}
