package migrations

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The outbox table's partial indexes: the pending rows by time, by aggregate, and the
// handed-over rows. An index is walrelay's by what it is (method, columns,
// predicate), whatever its name: a database may hold one under an older name. A new
// one is named after its table, so that two outbox tables in one schema never ask
// for one name.
//
// On a large table (Options.LargeTable) the builds run after the migration's
// transaction, with CREATE INDEX CONCURRENTLY, so that writes go on. A partitioned
// table has no concurrent build of its own: its index is created ON ONLY the parent
// (a catalog change, in the transaction), built CONCURRENTLY on each partition after
// it and attached; once every partition's is attached, PostgreSQL marks the
// parent's valid. A run that stopped half way left an invalid parent index, which the
// next run completes partition by partition.

type wantIndex struct {
	suffix    string // of the name: idx_<table><suffix>
	columns   []string
	predicate string // deparsed (pg_get_expr)
	where     string // as written
}

// indexName is walrelay's name for a table's index.
func indexName(table, suffix string) string { return fitName("idx_"+table, suffix) }

// fitName is name+suffix, name cut so that the whole fits PostgreSQL's 63 bytes.
func fitName(name, suffix string) string {
	if len(name)+len(suffix) > 63 {
		name = name[:63-len(suffix)]
	}
	return name + suffix
}

const (
	buildLock      = "SHARE (blocks writes while the index builds)"
	concurrentLock = "SHARE UPDATE EXCLUSIVE (writes go on; waits for older transactions)"
	onOnlyLock     = "SHARE (a catalog change: the index is built per partition after the commit)"
	attachLock     = "ACCESS EXCLUSIVE on the partition's new index (a catalog change: writes to the partition wait milliseconds)"
)

// relation is a table or an index, by oid and schema-qualified name.
type relation struct {
	oid          uint32
	schema, name string
	kind         string // relkind
}

func (r relation) ident() string   { return ident(r.schema, r.name) }
func (r relation) display() string { return r.schema + "." + r.name }

// existing is an index found that is w.
type existing struct {
	relation
	valid bool
}

// findIndex finds an index on table that is w, whatever its name; valid ones first.
func findIndex(ctx context.Context, q pgx.Tx, table uint32, w wantIndex) (existing, bool, error) {
	var e existing
	err := q.QueryRow(ctx, `SELECT i.indexrelid, n.nspname, c.relname, c.relkind::text, i.indisvalid
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
			JOIN pg_am am ON am.oid = c.relam
		WHERE i.indrelid = $1 AND am.amname = 'btree' AND NOT i.indisunique AND i.indexprs IS NULL
			AND coalesce(pg_get_expr(i.indpred, i.indrelid), '') = $2
			AND ARRAY(SELECT a.attname::text FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)
				JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum ORDER BY k.ord) = $3::text[]
		ORDER BY i.indisvalid DESC, c.relname LIMIT 1`, table, w.predicate, w.columns).
		Scan(&e.oid, &e.schema, &e.name, &e.kind, &e.valid)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, false, nil
	}
	if err != nil {
		return e, false, fmt.Errorf("look up the indexes of table oid %d: %w", table, err)
	}
	return e, true, nil
}

// nameFree reports whether schema has no relation named name; when it has one, it
// plans the conflict: walrelay needs that name for w on table.
func nameFree(ctx context.Context, q pgx.Tx, p *plan, table relation, name string, w wantIndex) (bool, error) {
	var oid uint32
	var kind, def, on string
	err := q.QueryRow(ctx, `SELECT c.oid, c.relkind::text, CASE WHEN c.relkind IN ('i', 'I') THEN pg_get_indexdef(c.oid) ELSE '' END,
			coalesce((SELECT t.relname FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid WHERE i.indexrelid = c.oid), '')
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`,
		table.schema, name).Scan(&oid, &kind, &def, &on)
	if errors.Is(err, pgx.ErrNoRows) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up %s.%s: %w", table.schema, name, err)
	}
	qualified := ident(table.schema, name)
	switch {
	case kind != "i" && kind != "I":
		p.conflict(fmt.Sprintf("%s.%s exists and is not an index (relkind %s)", table.schema, name, kind),
			"walrelay needs that name for an index on %s; rename it (ALTER TABLE %s RENAME TO ...) or drop it", table.display(), qualified)
	case on != table.name:
		p.conflict(fmt.Sprintf("index %s.%s belongs to table %s (%s); walrelay names the index of %s (%s) WHERE %s after its table",
			table.schema, name, on, def, table.display(), strings.Join(w.columns, ", "), w.where),
			"rename it after its own table (ALTER INDEX %s RENAME TO %s), or drop it", qualified, ident(indexName(on, w.suffix)))
	default:
		p.conflict(fmt.Sprintf("index %s exists with another definition (%s); walrelay's is %s (%s) WHERE %s",
			name, def, table.display(), strings.Join(w.columns, ", "), w.where),
			"rename it (ALTER INDEX %s RENAME TO ...) or drop it (DROP INDEX %s)", qualified, qualified)
	}
	return false, nil
}

// planIndex plans w on the outbox table: nothing when a valid one is there, the build
// of what an interrupted run left invalid, or a new one.
func planIndex(ctx context.Context, q pgx.Tx, p *plan, table relation, w wantIndex) error {
	found, ok, err := findIndex(ctx, q, table.oid, w)
	switch {
	case err != nil:
		return err
	case ok && found.valid:
		return nil
	case ok && table.kind == "p":
		return planPartitions(ctx, q, p, found.relation, table, w)
	case ok:
		// A CREATE INDEX CONCURRENTLY that failed leaves an invalid index behind, which
		// IF NOT EXISTS would keep: build it again.
		if p.large {
			p.add("DROP INDEX CONCURRENTLY IF EXISTS "+found.ident(), concurrentLock, true)
		} else {
			p.add("DROP INDEX "+found.ident(), "ACCESS EXCLUSIVE", false)
		}
		p.add(createIndex(found.name, table, w, map[bool]string{false: "", true: "CONCURRENTLY"}[p.large]),
			map[bool]string{false: buildLock, true: concurrentLock}[p.large], p.large)
		return nil
	}
	name := indexName(table.name, w.suffix)
	if free, err := nameFree(ctx, q, p, table, name, w); err != nil || !free {
		return err
	}
	switch {
	case p.large && table.kind == "p":
		p.add(createIndex(name, table, w, "ONLY"), onOnlyLock, false)
		return planPartitions(ctx, q, p, relation{schema: table.schema, name: name}, table, w)
	case p.large:
		p.add(createIndex(name, table, w, "CONCURRENTLY"), concurrentLock, true)
	default:
		p.add(createIndex(name, table, w, ""), buildLock, false)
	}
	return nil
}

// createIndex is the CREATE INDEX of w named name on table; how is "", CONCURRENTLY,
// or ONLY (the parent's own index of a partitioned table).
func createIndex(name string, table relation, w wantIndex, how string) string {
	quoted := make([]string, len(w.columns))
	for i, c := range w.columns {
		quoted[i] = ident(c)
	}
	kw, on := "CREATE INDEX ", "\n    ON "
	switch how {
	case "CONCURRENTLY":
		kw = "CREATE INDEX CONCURRENTLY "
	case "ONLY":
		on = "\n    ON ONLY "
	}
	return kw + "IF NOT EXISTS " + ident(name) + on + table.ident() + " (" + strings.Join(quoted, ", ") + ")\n    WHERE " + w.where
}

// planPartitions plans, after the transaction, w's index on each partition of table
// that parent (table's index, oid 0 when created by this run) lacks: built
// CONCURRENTLY, or taken when one is there, and attached to parent. A partition that
// is partitioned itself gets an index ON ONLY it, its own partitions', and is
// attached in turn.
func planPartitions(ctx context.Context, q pgx.Tx, p *plan, parent relation, table relation, w wantIndex) error {
	rows, err := q.Query(ctx, `SELECT c.oid, n.nspname, c.relname, c.relkind::text
		FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE h.inhparent = $1 ORDER BY n.nspname, c.relname`, table.oid)
	if err != nil {
		return fmt.Errorf("read the partitions of %s: %w", table.display(), err)
	}
	var parts []relation
	var r relation
	if _, err := pgx.ForEachRow(rows, []any{&r.oid, &r.schema, &r.name, &r.kind}, func() error {
		parts = append(parts, r)
		return nil
	}); err != nil {
		return fmt.Errorf("read the partitions of %s: %w", table.display(), err)
	}
	attach := func(part, idx relation) {
		p.steps = append(p.steps, Step{SQL: "ALTER INDEX " + parent.ident() + " ATTACH PARTITION " + idx.ident(),
			Lock: attachLock, Concurrent: true, Table: part.display()})
	}
	for _, part := range parts {
		if parent.oid != 0 {
			var idx existing
			err := q.QueryRow(ctx, `SELECT x.indexrelid, n.nspname, c.relname, c.relkind::text, x.indisvalid
				FROM pg_inherits h JOIN pg_index x ON x.indexrelid = h.inhrelid JOIN pg_class c ON c.oid = x.indexrelid
					JOIN pg_namespace n ON n.oid = c.relnamespace
				WHERE h.inhparent = $1 AND x.indrelid = $2`, parent.oid, part.oid).Scan(&idx.oid, &idx.schema, &idx.name, &idx.kind, &idx.valid)
			switch {
			case err == nil && idx.valid:
				continue
			case err == nil: // a partitioned partition's, short of some of its own partitions'
				if err := planPartitions(ctx, q, p, idx.relation, part, w); err != nil {
					return err
				}
				continue
			case !errors.Is(err, pgx.ErrNoRows):
				return fmt.Errorf("read the index of partition %s: %w", part.display(), err)
			}
		}
		found, ok, err := findIndex(ctx, q, part.oid, w)
		if err != nil {
			return err
		}
		idx := found.relation
		switch {
		case ok && (found.valid || part.kind == "p"):
		case ok:
			p.steps = append(p.steps, Step{SQL: "DROP INDEX CONCURRENTLY IF EXISTS " + found.ident(), Lock: concurrentLock,
				Concurrent: true, Table: part.display()})
			fallthrough
		default:
			if !ok {
				idx = relation{schema: part.schema, name: indexName(part.name, w.suffix)}
				if free, err := nameFree(ctx, q, p, part, idx.name, w); err != nil || !free {
					return err
				}
			}
			if part.kind == "p" {
				p.steps = append(p.steps, Step{SQL: createIndex(idx.name, part, w, "ONLY"), Lock: onOnlyLock, Table: part.display()})
				break
			}
			p.steps = append(p.steps, Step{SQL: createIndex(idx.name, part, w, "CONCURRENTLY"), Lock: concurrentLock,
				Concurrent: true, Table: part.display()})
		}
		if part.kind == "p" {
			if err := planPartitions(ctx, q, p, idx, part, w); err != nil {
				return err
			}
		}
		attach(part, idx)
	}
	return nil
}
