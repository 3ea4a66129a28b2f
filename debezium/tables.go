package debezium

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/record"
)

// Catalog is what import-debezium reads of the outbox database: its tables, which
// table.include.list regular expressions are resolved against, and their
// columns' types, which say what ByteBufferConverter does with a column.
type Catalog struct {
	// Tables are the ordinary and partitioned tables as schema.table, the names
	// Debezium's PostgreSQL connector matches table.include.list against
	// (TableId.toString), PostgreSQL's own schemas left out.
	Tables []string
	// Types are each table's columns' type names (pg_type.typname; bytea, jsonb,
	// text, ...), by table, then column.
	Types map[string]map[string]string
}

// ReadCatalog reads the tables and column types of the database at dbURL.
func ReadCatalog(ctx context.Context, dbURL string) (*Catalog, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("connect to --database-url to read its tables: %w", err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT n.nspname || '.' || c.relname, coalesce(a.attname::text, ''), coalesce(t.typname::text, '')
		FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		LEFT JOIN pg_type t ON t.oid = a.atttypid
		WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
			AND n.nspname NOT LIKE 'pg\_toast%' AND n.nspname NOT LIKE 'pg\_temp\_%'
		ORDER BY 1, a.attnum`)
	if err != nil {
		return nil, fmt.Errorf("list the tables of --database-url: %w", err)
	}
	cat := &Catalog{Types: map[string]map[string]string{}}
	var table, column, typ string
	_, err = pgx.ForEachRow(rows, []any{&table, &column, &typ}, func() error {
		if _, seen := cat.Types[table]; !seen {
			cat.Tables = append(cat.Tables, table)
			cat.Types[table] = map[string]string{}
		}
		if column != "" {
			cat.Types[table][column] = typ
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the tables of --database-url: %w", err)
	}
	return cat, nil
}

// includedTables resolves one table.include.list entry: a plain name is itself; a
// regular expression is matched as Debezium does (Predicates.includes: the whole
// name, case-insensitively) against catalog, the database's tables; without one
// (nil) it cannot be resolved. reason says why an entry gives no table.
func includedTables(entry string, catalog *Catalog) (tables []string, reason string) {
	plain := strings.ReplaceAll(entry, `\.`, ".")
	if !strings.ContainsAny(plain, `\*+?[](){}|^$`) {
		return []string{plain}, ""
	}
	if catalog == nil {
		return nil, "a regular expression; give --database-url to resolve it against the database's tables, " +
			"or list the outbox tables by name"
	}
	if construct, ok := record.JavaOnly(entry); ok {
		return nil, "a regular expression with " + construct + ", which Go's RE2 cannot read; list the outbox tables by name"
	}
	re, err := regexp.Compile(`(?i)^(?:` + entry + `)$`)
	if err != nil {
		return nil, fmt.Sprintf("not a regular expression Go can read (%v); list the outbox tables by name", err)
	}
	for _, t := range catalog.Tables {
		if re.MatchString(t) {
			tables = append(tables, t)
		}
	}
	if len(tables) == 0 {
		return nil, "a regular expression no table of --database-url matches; check the database, or list the outbox tables by name"
	}
	return tables, ""
}

// tables resolves table.include.list and writes the table, with the fields, or a
// tables list, each table with them.
func (c *conversion) tables() {
	var tables []string
	if list, ok := c.use("table.include.list"); ok {
		seen := map[string]bool{}
		for _, entry := range splitList(list) {
			resolved, reason := includedTables(entry, c.catalog)
			if reason != "" {
				c.differs("table.include.list", entry, reason)
				continue
			}
			if len(resolved) != 1 || resolved[0] != strings.ReplaceAll(entry, `\.`, ".") {
				c.b.WriteString("# table.include.list " + entry + ": the database's tables it matches: " + strings.Join(resolved, ", ") + "\n")
			}
			for _, t := range resolved {
				if !seen[t] {
					seen[t] = true
					tables = append(tables, t)
				}
			}
		}
	}
	switch {
	case len(tables) <= 1:
		if len(tables) == 1 {
			line(&c.b, "table", tables[0])
		} else {
			c.b.WriteString("# table.include.list names no table: set table to the outbox table\n")
		}
		for _, f := range c.fields {
			line(&c.b, f[0], f[1])
		}
	default:
		c.b.WriteString("tables:\n")
		for _, t := range tables {
			c.b.WriteString("  - table: " + yamlScalar(t) + "\n")
			for _, f := range c.fields {
				c.b.WriteString("    " + f[0] + ": " + yamlScalar(f[1]) + "\n")
			}
		}
	}
}
