package catalog

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Grant is the privileges a relay's role needs on one table, and what for.
type Grant struct {
	Privileges []string // SELECT, INSERT, UPDATE, DELETE
	Table      string   // as SQL names it: quoted, optionally schema-qualified
	For        string
}

// Statement is the GRANT that gives role g's privileges.
func (g Grant) Statement(role string) string {
	return "GRANT " + strings.Join(g.Privileges, ", ") + " ON " + g.Table + " TO " + pgx.Identifier{role}.Sanitize()
}

// GrantNeeds says which of the outbox tables' optional privileges a relay's mode
// uses: INSERT to hand a failed event to the poller under --on-publish none, DELETE
// for --on-publish delete and the retention cleanup.
type GrantNeeds struct {
	Insert, Delete bool
}

// RelayGrants are the privileges run, status, dlq and replay need as a role with no
// others (docs/operations.md, "Least privilege"): on each outbox table (tables are as
// SQL names them), and on walrelay's own tables.
func RelayGrants(tables []string, needs GrantNeeds) []Grant {
	var grants []Grant
	for _, t := range tables {
		privs, why := []string{"SELECT", "UPDATE"}, "read, mark and retry"
		if needs.Insert {
			privs, why = append(privs, "INSERT"), why+", hand failed events to the poller"
		}
		if needs.Delete {
			privs, why = append(privs, "DELETE"), why+", delete published rows"
		}
		grants = append(grants, Grant{Privileges: privs, Table: t, For: why})
	}
	for _, own := range []struct{ table, why string }{
		{"walrelay_slots", "the slot's incarnations and catch-up passes"},
		{"walrelay_progress", "the published horizon"},
		{"walrelay_table_slots", "each table's slot and its passes"},
		{"walrelay_confirmed", "the confirmed position sessions resume from"},
	} {
		grants = append(grants, Grant{Privileges: []string{"SELECT", "INSERT", "UPDATE"}, Table: own.table, For: own.why})
	}
	return grants
}

// CheckPrivileges checks that the connected role holds every grant, so that a
// missing one stops the relay with one error naming the statement to run, before
// anything starts, rather than as background work failing one by one.
func CheckPrivileges(ctx context.Context, conn *pgx.Conn, grants []Grant) error {
	var role string
	if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&role); err != nil {
		return fmt.Errorf("read the current role: %w", err)
	}
	for _, g := range grants {
		var missing []string
		for _, p := range g.Privileges {
			var has bool
			if err := conn.QueryRow(ctx, "SELECT has_table_privilege($1::regclass, $2)", g.Table, p).Scan(&has); err != nil {
				return fmt.Errorf("check %s on %s: %w", p, g.Table, err)
			}
			if !has {
				missing = append(missing, p)
			}
		}
		if len(missing) > 0 {
			fix := Grant{Privileges: missing, Table: g.Table}
			return setupErrorf("role %s lacks %s on %s (%s); as the table's owner run %s, "+
				"or `walrelay migrate --grant-to %s` for every privilege the relay needs",
				role, strings.Join(missing, ", "), g.Table, g.For, fix.Statement(role), role)
		}
	}
	return nil
}
