package migrations

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/catalog"
)

// The outbox table is not versioned: its name and columns are the user's, and it may
// have existed long before walrelay (the article's table, Debezium's). plan reads the
// catalog and returns the statements that add what walrelay needs and is missing,
// or the conflicts that stop it from doing so; it changes nothing.

// Step is one planned statement.
type Step struct {
	SQL string
	// Lock is the lock the statement takes on the outbox table ("" when none worth
	// telling). Inside the migration transaction it is held until the commit.
	Lock string
	// Concurrent steps run after the transaction committed, one by one: CREATE INDEX
	// CONCURRENTLY cannot run inside a transaction block.
	Concurrent bool
	// Table is what Lock is taken on when it is not the outbox table: a partition.
	Table string
}

// Conflict is something walrelay will not change on its own, with what to do.
type Conflict struct {
	Problem string
	Advice  string
}

func (c Conflict) String() string {
	if c.Advice == "" {
		return c.Problem
	}
	return c.Problem + "; " + c.Advice
}

// ConflictError lists every conflict found; nothing was changed.
type ConflictError struct {
	Table     string
	Conflicts []Conflict
}

func (e *ConflictError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cannot adopt table %s, nothing was changed:", e.Table)
	for _, c := range e.Conflicts {
		b.WriteString("\n  - " + c.String())
	}
	b.WriteString("\nthen run walrelay migrate again")
	return b.String()
}

// plan is what the outbox table needs.
type plan struct {
	table       string // schema-qualified, quoted
	display     string // schema.name as the user reads it
	exists      bool
	partitioned bool
	rows        float64 // pg_class.reltuples, or counted up to the threshold when never analysed
	large       bool    // indexes are built CONCURRENTLY (per partition), after the transaction
	steps       []Step
	conflicts   []Conflict
}

// on names what s locks.
func (s Step) on(p *plan) string {
	if s.Table != "" {
		return s.Table
	}
	return p.display
}

func (p *plan) add(sql, lock string, concurrent bool) {
	p.steps = append(p.steps, Step{SQL: sql, Lock: lock, Concurrent: concurrent})
}

func (p *plan) conflict(problem, advice string, args ...any) {
	p.conflicts = append(p.conflicts, Conflict{Problem: problem, Advice: fmt.Sprintf(advice, args...)})
}

func ident(parts ...string) string { return pgx.Identifier(parts).Sanitize() }

// The deparsed index predicates (pg_get_expr), as walrelay creates them.
const (
	pendingPredicate    = "(processed_at IS NULL)"
	handedOverPredicate = "((processed_at IS NULL) AND ((retry_after IS NOT NULL) OR (dead_lettered_at IS NOT NULL)))"
)

// deadLetterViewName names the table's dead-letter view after it.
func deadLetterViewName(table string) string { return fitName(table, "_dead_letters") }

func splitTable(table string) (schema, name string) {
	if s, n, ok := strings.Cut(table, "."); ok {
		return s, n
	}
	return "public", table // as the relay reads an unqualified --table
}

type column struct {
	typ     string
	notNull bool
}

// planOutbox inspects the catalog (through q, read only) and plans the outbox table.
func planOutbox(ctx context.Context, q pgx.Tx, o Options) (*plan, error) {
	schema, name := splitTable(o.Table)
	cols := o.Columns
	p := &plan{table: ident(schema, name), display: schema + "." + name}

	var oid uint32
	var kind string
	// A partitioned table's own reltuples says nothing: its partitions hold the rows.
	err := q.QueryRow(ctx, `SELECT c.oid, c.relkind::text, CASE WHEN c.relkind = 'p' THEN
			(SELECT CASE WHEN bool_or(l.reltuples < 0) THEN -1 ELSE coalesce(sum(l.reltuples), 0) END
				FROM pg_partition_tree(c.oid) t JOIN pg_class l ON l.oid = t.relid WHERE t.isleaf)
			ELSE c.reltuples END::float8
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`, schema, name).
		Scan(&oid, &kind, &p.rows)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("look up table %s: %w", p.display, err)
	default:
		p.exists = true
		if p.rows < 0 && (kind == "r" || kind == "p") { // never vacuumed or analysed: count, up to the threshold
			if err := q.QueryRow(ctx, "SELECT count(*)::float8 FROM (SELECT 1 FROM "+p.table+" LIMIT $1) s",
				int64(o.largeTable())+1).Scan(&p.rows); err != nil {
				return nil, fmt.Errorf("count rows of %s: %w", p.display, err)
			}
		}
	}
	var schemaExists bool
	if err := q.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&schemaExists); err != nil {
		return nil, fmt.Errorf("look up schema %s: %w", schema, err)
	}
	if !schemaExists {
		p.conflict(fmt.Sprintf("schema %s does not exist", schema),
			"create it (CREATE SCHEMA %s) or set --table to a table in an existing schema", ident(schema))
		return p, nil
	}
	partitioned := kind == "p"
	p.partitioned = partitioned
	if p.exists && kind != "r" && kind != "p" {
		p.conflict(fmt.Sprintf("%s exists and is not a table (relkind %s)", p.display, kind),
			"set --table to your outbox table, or rename %s (ALTER ... RENAME TO ...)", p.display)
		return p, nil
	}

	have := map[string]column{}
	if p.exists {
		rows, err := q.Query(ctx, `SELECT attname, format_type(atttypid, atttypmod), attnotnull FROM pg_attribute
			WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, oid)
		if err != nil {
			return nil, fmt.Errorf("read columns of %s: %w", p.display, err)
		}
		var names []string
		for rows.Next() {
			var n string
			var c column
			if err := rows.Scan(&n, &c.typ, &c.notNull); err != nil {
				return nil, fmt.Errorf("read columns of %s: %w", p.display, err)
			}
			have[n] = c
			names = append(names, n)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read columns of %s: %w", p.display, err)
		}
		for _, c := range []struct{ setting, name, holds string }{
			{"column-id", cols.ID, "event id"}, {"column-aggregate-type", cols.AggregateType, "aggregate type"},
			{"column-aggregate-id", cols.AggregateID, "aggregate id"}, {"column-event-type", cols.EventType, "event type"},
			{"column-payload", cols.Payload, "payload"}, {"column-created-at", cols.CreatedAt, "creation time"},
		} {
			if c.name == "" {
				continue
			}
			if _, ok := have[c.name]; !ok {
				advice := "set --%s to the column that holds the %s (the table's columns: %s)"
				if c.setting == "column-created-at" || c.setting == "column-event-type" {
					advice += ", or to an empty value when there is none"
				}
				p.conflict(fmt.Sprintf("table %s has no column %q", p.display, c.name), advice,
					c.setting, c.holds, strings.Join(names, ", "))
			}
		}
		var add []string
		for _, b := range catalog.Bookkeeping {
			c, ok := have[b.Name]
			if !ok {
				add = append(add, "ADD COLUMN "+ident(b.Name)+" "+b.DDL)
				continue
			}
			if !slices.Contains(b.Types, c.typ) {
				p.conflict(fmt.Sprintf("column %s.%s is %s, walrelay keeps %s in it", p.display, b.Name, c.typ, b.DDL),
					"rename it (ALTER TABLE %s RENAME COLUMN %s TO ...) or change its type (ALTER TABLE %s ALTER COLUMN %s TYPE %s, which rewrites the table)",
					p.table, ident(b.Name), p.table, ident(b.Name), strings.Fields(b.DDL)[0])
			}
		}
		if len(p.conflicts) == 0 {
			// What `walrelay run` would refuse (a column type it cannot read, no unique
			// index on id), refused before anything is changed.
			var setup *catalog.SetupError
			if _, err := catalog.DescribeTable(ctx, q, o.Table, cols); errors.As(err, &setup) {
				p.conflicts = append(p.conflicts, Conflict{Problem: setup.Msg})
			} else if err != nil {
				return nil, err
			}
		}
		if len(add) > 0 {
			p.add("ALTER TABLE "+p.table+"\n    "+strings.Join(add, ",\n    "), "ACCESS EXCLUSIVE", false)
		}
	} else {
		defs := []string{
			ident(cols.ID) + " UUID PRIMARY KEY DEFAULT gen_random_uuid()",
			ident(cols.AggregateType) + " VARCHAR(100) NOT NULL",
			ident(cols.AggregateID) + " VARCHAR(100) NOT NULL",
		}
		if cols.EventType != "" {
			defs = append(defs, ident(cols.EventType)+" VARCHAR(100) NOT NULL")
		}
		defs = append(defs, ident(cols.Payload)+" JSONB NOT NULL", "attempts INT NOT NULL DEFAULT 0")
		if cols.CreatedAt != "" {
			defs = append(defs, ident(cols.CreatedAt)+" TIMESTAMPTZ NOT NULL DEFAULT NOW()")
		}
		defs = append(defs, "processed_at TIMESTAMPTZ", "retry_after TIMESTAMPTZ", "last_error TEXT", "dead_lettered_at TIMESTAMPTZ")
		p.add("CREATE TABLE "+p.table+" (\n    "+strings.Join(defs, ",\n    ")+"\n)", "", false)
	}
	if len(p.conflicts) > 0 {
		return p, nil // the rest depends on the columns
	}

	// Indexes: the pending rows by time, by aggregate, and the handed-over rows.
	order := cols.CreatedAt
	if order == "" {
		order = cols.ID
	}
	byAggregate := []string{cols.AggregateType, cols.AggregateID}
	if cols.CreatedAt != "" {
		byAggregate = append(byAggregate, cols.CreatedAt)
	}
	p.large = p.rows > o.largeTable()
	table := relation{oid: oid, schema: schema, name: name, kind: kind}
	for _, w := range []wantIndex{
		{"_unprocessed", []string{order}, pendingPredicate, "processed_at IS NULL"},
		{"_pending_aggregate", byAggregate, pendingPredicate, "processed_at IS NULL"},
		{"_handed_over", []string{order}, handedOverPredicate,
			"processed_at IS NULL AND (retry_after IS NOT NULL OR dead_lettered_at IS NOT NULL)"},
	} {
		if err := planIndex(ctx, q, p, table, w); err != nil {
			return nil, err
		}
	}

	if err := planView(ctx, q, p, schema, deadLetterViewName(name), oid, order); err != nil {
		return nil, err
	}
	if err := planPendingView(ctx, q, p, schema, pendingViewName(name)); err != nil {
		return nil, err
	}
	if err := planPublication(ctx, q, p, o.Publication, schema, name, partitioned, o.Listed); err != nil {
		return nil, err
	}
	return p, nil
}

// planView plans the dead-letter view. One on the table under another name (an
// older walrelay's outbox_dead_letters) is walrelay's; a view of walrelay's name that
// means something else is a conflict.
func planView(ctx context.Context, q pgx.Tx, p *plan, schema, view string, table uint32, order string) error {
	qualified := ident(schema, view)
	sql := "CREATE VIEW " + qualified + " AS\nSELECT *\nFROM " + p.table +
		"\nWHERE dead_lettered_at IS NOT NULL\n  AND processed_at IS NULL\nORDER BY " + ident(order)
	if p.exists {
		rows, err := q.Query(ctx, `SELECT DISTINCT pg_get_viewdef(r.ev_class, false) FROM pg_rewrite r
			JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
			JOIN pg_class c ON c.oid = r.ev_class
			WHERE d.refobjid = $1::oid AND c.relkind = 'v' AND r.ev_class <> $1::oid`, table)
		if err != nil {
			return fmt.Errorf("read the views of %s: %w", p.display, err)
		}
		defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("read the views of %s: %w", p.display, err)
		}
		if slices.ContainsFunc(defs, viewIsWalrelays) {
			return nil
		}
	}
	var relOid uint32
	var kind string
	err := q.QueryRow(ctx, `SELECT c.oid, c.relkind::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = $2`, schema, view).Scan(&relOid, &kind)
	if errors.Is(err, pgx.ErrNoRows) {
		p.add(sql, "ACCESS SHARE", false)
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up view %s: %w", view, err)
	}
	if kind != "v" {
		p.conflict(fmt.Sprintf("%s.%s exists and is not a view (relkind %s)", schema, view, kind),
			"walrelay needs that name for its dead-letter view; rename it (ALTER TABLE %s RENAME TO ...) or drop it", qualified)
		return nil
	}
	var def string
	var onTable bool
	if err := q.QueryRow(ctx, `SELECT pg_get_viewdef($1::oid, false), EXISTS (SELECT 1 FROM pg_rewrite r
			JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
			WHERE r.ev_class = $1::oid AND d.refobjid = $2::oid)`, relOid, table).Scan(&def, &onTable); err != nil {
		return fmt.Errorf("read view %s: %w", view, err)
	}
	if onTable && viewIsWalrelays(def) {
		return nil
	}
	p.conflict(fmt.Sprintf("view %s exists with another definition (%s); walrelay's lists the rows of %s with dead_lettered_at IS NOT NULL AND processed_at IS NULL",
		view, strings.Join(strings.Fields(def), " "), p.display),
		"rename it (ALTER VIEW %s RENAME TO ...) or drop it (DROP VIEW %s)", qualified, qualified)
	return nil
}

// pendingViewName names the view of a table's rows not yet published: the article's
// "processed_at IS NULL", whatever the --on-publish mode.
func pendingViewName(name string) string {
	const suffix = "_pending"
	if len(name)+len(suffix) > 63 {
		name = name[:63-len(suffix)]
	}
	return name + suffix
}

// planPendingView plans the view of the rows not yet published: not marked and not
// covered by the published horizon (docs/design.md invariant 10). Dead letters and
// rows handed to the poller are pending, as they are with processed_at IS NULL.
//
// It has no ORDER BY, so that counting it is one scan of the table, not a walk of an
// index over every row.
func planPendingView(ctx context.Context, q pgx.Tx, p *plan, schema, view string) error {
	qualified := ident(schema, view)
	sql := "CREATE VIEW " + qualified + " AS\nSELECT *\nFROM " + p.table +
		"\nWHERE " + catalog.NotPublished(quote(p.table), "\n    ")
	var kind, def string
	err := q.QueryRow(ctx, `SELECT c.relkind::text, CASE WHEN c.relkind = 'v' THEN pg_get_viewdef(c.oid, false) ELSE '' END
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = $2`, schema, view).Scan(&kind, &def)
	if errors.Is(err, pgx.ErrNoRows) {
		p.add(sql, "ACCESS SHARE", false)
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up view %s: %w", view, err)
	}
	if kind == "v" && strings.Contains(def, "walrelay_published(") {
		return nil
	}
	p.conflict(fmt.Sprintf("%s.%s exists and is not walrelay's view of the rows not yet published", schema, view),
		"rename it (ALTER TABLE %s RENAME TO ...) or drop it", qualified)
	return nil
}

// quote quotes s as an SQL string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// viewIsWalrelays reports whether a view's definition (pg_get_viewdef, not pretty)
// filters on exactly walrelay's dead-letter condition, whatever the qualifiers.
func viewIsWalrelays(def string) bool {
	norm := strings.ReplaceAll(strings.ToLower(def), `"`, "")
	norm = qualifier.ReplaceAllString(norm, "")
	norm = strings.Join(strings.Fields(norm), "")
	_, rest, ok := strings.Cut(norm, "where((dead_lettered_atisnotnull)and(processed_atisnull))")
	return ok && (rest == "" || rest == ";" || strings.HasPrefix(rest, "orderby"))
}

var qualifier = regexp.MustCompile(`\b[a-z_][a-z0-9_$]*\.`)

func planPublication(ctx context.Context, q pgx.Tx, p *plan, publication, schema, name string, partitioned, listed bool) error {
	with := "publish = 'insert'"
	if partitioned {
		with += ", publish_via_partition_root = true"
	}
	pub := ident(publication)
	var allTables, inserts, viaRoot bool
	err := q.QueryRow(ctx, "SELECT puballtables, pubinsert, pubviaroot FROM pg_publication WHERE pubname = $1",
		publication).Scan(&allTables, &inserts, &viaRoot)
	if errors.Is(err, pgx.ErrNoRows) {
		p.add("CREATE PUBLICATION "+pub+" FOR TABLE "+p.table+" WITH ("+with+")", "SHARE UPDATE EXCLUSIVE", false)
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up publication %s: %w", publication, err)
	}
	if !inserts {
		p.conflict(fmt.Sprintf("publication %s does not publish inserts", publication),
			"run ALTER PUBLICATION %s SET (publish = 'insert'), or set --publication to another name", pub)
	}
	if partitioned && !viaRoot {
		p.conflict(fmt.Sprintf("table %s is partitioned and publication %s publishes its partitions under their own names", p.display, publication),
			"run ALTER PUBLICATION %s SET (publish_via_partition_root = true), or set --publication to another name", pub)
	}
	if allTables {
		return nil
	}
	if !p.exists {
		// A table created now has no rows anyone else could be sent.
		p.add("ALTER PUBLICATION "+pub+" ADD TABLE "+p.table, "SHARE UPDATE EXCLUSIVE", false)
		return nil
	}
	var included bool
	if err := q.QueryRow(ctx,
		"SELECT EXISTS (SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3)",
		publication, schema, name).Scan(&included); err != nil {
		return fmt.Errorf("read tables of publication %s: %w", publication, err)
	}
	if !included && listed {
		p.add("ALTER PUBLICATION "+pub+" ADD TABLE "+p.table, "SHARE UPDATE EXCLUSIVE", false)
		return nil
	}
	if !included {
		p.conflict(fmt.Sprintf("publication %s exists and does not include table %s", publication, p.display),
			"run ALTER PUBLICATION %s ADD TABLE %s (when nothing else relies on what it publishes), or set --publication to another name", pub, p.table)
	}
	return nil
}
