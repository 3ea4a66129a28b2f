package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/settings"
)

// databaseFlag adds --database, for a command that works on one database of a
// file's databases list.
func databaseFlag(cmd *cobra.Command, what string) {
	cmd.Flags().String("database", "", "with a file's databases list: the database to "+what+" (the only one when it lists one)")
}

// databaseEntries are the settings of the databases a command works on: the top
// level's without a databases list; else the entry --database names, or every entry
// when none is named and all is set, or the only one.
func databaseEntries(cmd *cobra.Command, s *settings.Settings, all bool) ([]*settings.Settings, error) {
	only, _ := cmd.Flags().GetString("database")
	names := s.DatabaseNames()
	if len(names) == 0 {
		if only != "" {
			return nil, fmt.Errorf("--database %s: the configuration lists no databases (a file's databases: list)", only)
		}
		return []*settings.Settings{s}, nil
	}
	if only == "" && !all && len(names) > 1 {
		return nil, fmt.Errorf("the configuration lists databases %s: name one with --database", strings.Join(names, ", "))
	}
	entries, err := s.Databases(cmd.Flags())
	if err != nil {
		return nil, err
	}
	return namedEntry(entries, only)
}

// namedEntry is entries, or the one of them only names when it is not empty.
func namedEntry(entries []*settings.Settings, only string) ([]*settings.Settings, error) {
	if only == "" {
		return entries, nil
	}
	names := make([]string, 0, len(entries))
	for _, d := range entries {
		if d.Name() == only {
			return []*settings.Settings{d}, nil
		}
		names = append(names, d.Name())
	}
	return nil, fmt.Errorf("--database %s: no such database in the file's databases list (%s)", only, strings.Join(names, ", "))
}

// oneDatabase is the settings of the one database a command works on (databaseEntries).
func oneDatabase(cmd *cobra.Command, s *settings.Settings) (*settings.Settings, error) {
	entries, err := databaseEntries(cmd, s, false)
	if err != nil {
		return nil, err
	}
	d := entries[0]
	if d.Relay.DatabaseURL == "" {
		if d.Name() != "" {
			return nil, fmt.Errorf("database %s: database-url is missing; set it in its entry or at the top level", d.Name())
		}
		return nil, fmt.Errorf("database url is required (--database-url or WALRELAY_DATABASE_URL)")
	}
	return d, nil
}
