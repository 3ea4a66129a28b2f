package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/dbconn"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/settings"
)

// grantRelayRole grants role what the relay's commands need on this database's
// tables for the configured mode (migrate --grant-to), as the owner migrate connects
// as, then prints what only a superuser can give: the REPLICATION attribute, and
// EXECUTE on pg_log_standby_snapshot() where the slot is on a standby. With dryRun
// it prints all of it and changes nothing.
func grantRelayRole(cmd *cobra.Command, s *settings.Settings, dbURL string, password dbconn.Password, role string, dryRun bool) error {
	out := cmd.OutOrStdout()
	tables := make([]string, 0, len(s.Relay.OutboxTables()))
	for _, t := range s.Relay.OutboxTables() {
		tables = append(tables, pgx.Identifier(strings.Split(t.Table, ".")).Sanitize())
	}
	grants := catalog.RelayGrants(tables, s.Relay.GrantNeeds())
	conn, err := dbconn.Connect(cmd.Context(), dbURL, password)
	if err != nil {
		return runtimeError{err}
	}
	defer conn.Close(cmd.Context())
	var replicates bool
	err = conn.QueryRow(cmd.Context(), "SELECT rolreplication FROM pg_roles WHERE rolname = $1", role).Scan(&replicates)
	if errors.Is(err, pgx.ErrNoRows) {
		return runtimeError{fmt.Errorf("--grant-to %s: no such role; create it first (CREATE ROLE %s LOGIN REPLICATION PASSWORD '...'), "+
			"then run migrate --grant-to again", role, pgx.Identifier{role}.Sanitize())}
	}
	if err != nil {
		return runtimeError{fmt.Errorf("--grant-to %s: read the role: %w", role, err)}
	}
	for _, g := range grants {
		stmt := g.Statement(role)
		if dryRun {
			fmt.Fprintf(out, "%s; -- %s\n", stmt, g.For)
			continue
		}
		if _, err := conn.Exec(cmd.Context(), stmt); err != nil {
			return runtimeError{fmt.Errorf("--grant-to %s: %s: %w", role, stmt, err)}
		}
		fmt.Fprintf(out, "granted: %s\n", stmt)
	}
	var superuser []string
	if s.Relay.Mode != relay.ModePoll && (!replicates || dryRun) {
		superuser = append(superuser, fmt.Sprintf("ALTER ROLE %s REPLICATION; -- stream mode reads the WAL through a replication connection",
			pgx.Identifier{role}.Sanitize()))
	}
	if s.Relay.PrimaryURL != "" {
		superuser = append(superuser, fmt.Sprintf("GRANT EXECUTE ON FUNCTION pg_log_standby_snapshot() TO %s; -- on the primary: "+
			"a slot on a standby waits for the primary's next snapshot record otherwise", pgx.Identifier{role}.Sanitize()))
	}
	if len(superuser) > 0 {
		fmt.Fprintln(out, "for a superuser to run (migrate cannot grant these):")
		for _, stmt := range superuser {
			fmt.Fprintln(out, "  "+stmt)
		}
	}
	return nil
}
