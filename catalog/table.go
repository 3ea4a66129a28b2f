package catalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TableWatch checks that the outbox table the slot streams is still the same table
// and still in the publication (docs/design.md invariant 9). A table dropped and
// created again, or renamed and swapped, under the same name is another table: none
// of its inserts are in the stream until it is added to the publication, and those
// made before are never in it. The stream would go on confirming past them.
type TableWatch struct {
	table, publication, slot string
	oid                      uint32
}

// WatchTable reads the table's identity and, where walrelay_slots records one for
// the slot, checks that it is the same; it records it when none is recorded.
func WatchTable(ctx context.Context, conn *pgx.Conn, table, publication, slot string) (*TableWatch, error) {
	w := &TableWatch{table: table, publication: publication, slot: slot}
	oid, err := w.current(ctx, conn)
	if err != nil {
		return nil, err
	}
	w.oid = oid
	var recorded *uint32
	err = conn.QueryRow(ctx, "SELECT table_oid FROM walrelay_slots WHERE slot_name = $1", slot).Scan(&recorded)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return w, nil // a slot walrelay did not create
	case err != nil:
		return nil, fmt.Errorf("read the table of slot %s: %w", slot, err)
	case recorded == nil:
		_, err = conn.Exec(ctx, "UPDATE walrelay_slots SET table_oid = $2 WHERE slot_name = $1", slot, oid)
		if err != nil {
			return nil, fmt.Errorf("record the table of slot %s: %w", slot, err)
		}
		return w, nil
	case *recorded != oid:
		return nil, w.replaced()
	}
	return w, nil
}

// TableWatches watches the several outbox tables a slot streams.
type TableWatches []*TableWatch

// WatchTables watches each of tables (schema-qualified or not). walrelay_slots
// records the first one's identity in table_oid, as WatchTable does, and the others'
// in table_oids (migration 6), each checked like the first.
func WatchTables(ctx context.Context, conn *pgx.Conn, tables []string, publication, slot string) (TableWatches, error) {
	var ws TableWatches
	for i, table := range tables {
		if i == 0 {
			w, err := WatchTable(ctx, conn, table, publication, slot)
			if err != nil {
				return nil, err
			}
			ws = append(ws, w)
			continue
		}
		w := &TableWatch{table: table, publication: publication, slot: slot}
		oid, err := w.current(ctx, conn)
		if err != nil {
			return nil, err
		}
		w.oid = oid
		if err := w.recordAmong(ctx, conn); err != nil {
			return nil, err
		}
		ws = append(ws, w)
	}
	return ws, nil
}

// recordAmong checks the table's identity against the one table_oids records for the
// slot, or records it there.
func (w *TableWatch) recordAmong(ctx context.Context, conn *pgx.Conn) error {
	schema, name := SplitTable(w.table)
	key := schema + "." + name
	var recorded *int64
	err := conn.QueryRow(ctx, "SELECT (table_oids ->> $2)::bigint FROM walrelay_slots WHERE slot_name = $1", w.slot, key).
		Scan(&recorded)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil // a slot walrelay did not create
	case errors.As(err, &pgErr) && pgErr.Code == "42703": // undefined column
		return setupErrorf("table walrelay_slots is older than this walrelay, which streams several outbox tables; " +
			"run `walrelay migrate`")
	case err != nil:
		return fmt.Errorf("read the tables of slot %s: %w", w.slot, err)
	case recorded == nil:
		_, err = conn.Exec(ctx, `UPDATE walrelay_slots SET table_oids = coalesce(table_oids, '{}'::jsonb) || jsonb_build_object($2::text, $3::bigint)
			WHERE slot_name = $1`, w.slot, key, int64(w.oid))
		if err != nil {
			return fmt.Errorf("record the tables of slot %s: %w", w.slot, err)
		}
		return nil
	case uint32(*recorded) != w.oid:
		return w.replaced()
	}
	return nil
}

// Check is TableWatch.Check for each table.
func (ws TableWatches) Check(ctx context.Context, conn *pgx.Conn) error {
	for _, w := range ws {
		if err := w.Check(ctx, conn); err != nil {
			return err
		}
	}
	return nil
}

// Check fails with a *SetupError when the table was replaced or left the
// publication since WatchTable. Call it before confirming an LSN: a change it does not
// see yet committed at the earliest at the end of what was received (a commit can
// reach the stream a moment before other sessions see it), and every insert into the
// replaced table comes after that change, so nothing confirmed passes one.
func (w *TableWatch) Check(ctx context.Context, conn *pgx.Conn) error {
	_, err := w.current(ctx, conn)
	return err
}

// current returns the table's OID: the one watched, if any, or a *SetupError when
// the table is missing, another one, or not published.
func (w *TableWatch) current(ctx context.Context, conn *pgx.Conn) (uint32, error) {
	schema, name := SplitTable(w.table)
	var oid *uint32
	var published, partitioned, viaRoot bool
	err := conn.QueryRow(ctx, `SELECT r.oid, coalesce(c.relkind = 'p', false),
			coalesce((SELECT pubviaroot FROM pg_publication WHERE pubname = $3), false),
			EXISTS (SELECT 1 FROM pg_publication p WHERE p.pubname = $3
			AND (p.puballtables OR EXISTS (SELECT 1 FROM pg_publication_tables t
				WHERE t.pubname = p.pubname AND t.schemaname = $1 AND t.tablename = $2)))
		FROM (SELECT to_regclass(format('%I.%I', $1::text, $2::text))::oid AS oid) r
		LEFT JOIN pg_class c ON c.oid = r.oid`, schema, name, w.publication).
		Scan(&oid, &partitioned, &viaRoot, &published)
	switch {
	case err != nil:
		return 0, fmt.Errorf("check outbox table %s: %w", w.table, err)
	case oid == nil:
		return 0, setupErrorf("outbox table %s no longer exists; create it, add it to publication %s, then %s",
			w.table, w.publication, w.advice())
	case w.oid != 0 && *oid != w.oid:
		return 0, w.replaced()
	case partitioned && !viaRoot:
		// The partitions' inserts are streamed under the partitions' names, which the
		// decoder takes for other tables: they would be confirmed unpublished.
		return 0, setupErrorf("publication %s no longer publishes partitioned outbox table %s through its root "+
			"(publish_via_partition_root was turned off); its inserts are streamed under the partitions' names "+
			"and walrelay cannot publish them. Run ALTER PUBLICATION %s SET (publish_via_partition_root = true), then %s",
			w.publication, w.table, pgx.Identifier{w.publication}.Sanitize(), w.advice())
	case !published:
		return 0, setupErrorf("outbox table %s left publication %s; its inserts are no longer streamed. "+
			"Run ALTER PUBLICATION %s ADD TABLE %s, then %s", w.table, w.publication, w.publication, w.table, w.advice())
	}
	return *oid, nil
}

func (w *TableWatch) replaced() error {
	return setupErrorf("outbox table %s was replaced (dropped and created again, or renamed and swapped) since slot %s "+
		"started streaming it; inserts into the new table before it joined publication %s are not in the slot. "+
		"Make sure the table is in the publication, then %s", w.table, w.slot, w.publication, w.advice())
}

// advice: a new slot's catch-up pass publishes every pending row, which is what
// closes the gap; without bookkeeping columns (--on-publish none) nothing can.
func (w *TableWatch) advice() string {
	return fmt.Sprintf("drop the slot (SELECT pg_drop_replication_slot('%s')) and start walrelay: it creates a new "+
		"slot and publishes every pending row (with --on-publish none, rows written to the table in the meantime "+
		"are not tracked and must be republished by hand)", w.slot)
}
