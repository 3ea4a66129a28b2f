package settings

import (
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/walrelay/walrelay/internal/suggest"
	"github.com/walrelay/walrelay/relay"
)

// processSettings are the settings of the whole process, which an entry of the
// file's databases list may not set: one listener, one log, one admin token serve
// every database (docs/configuration.md, "Several databases").
var processSettings = []string{"metrics-addr", "admin-url", "admin-token", "admin-hosts", "pprof", "log-level", "log-format"}

// databaseEntry is one entry of the file's databases list, as read: its keys are
// applied over the top-level settings by Databases.
type databaseEntry struct {
	name  string
	index int
	path  string       // the config file's
	line  int          // where the entry starts
	keys  []*yaml.Node // node's keys, in order
	items []*yaml.Node // node's values, in order
}

// where prefixes an entry's errors: its place in the file and its name.
func (e *databaseEntry) where() string { return e.whereAt(e.line) }

// whereAt is where, at line of the entry.
func (e *databaseEntry) whereAt(line int) string {
	at := fmt.Sprintf("config file %s, line %d: databases[%d]", e.path, line, e.index)
	if e.name == "" {
		return at
	}
	return fmt.Sprintf("%s (%s)", at, e.name)
}

// parseDatabases reads the file's databases list: each entry a map with a name of
// its own and the per-database settings it sets.
func parseDatabases(path string, v *yaml.Node) ([]databaseEntry, error) {
	if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
		return nil, fmt.Errorf("config file %s, line %d: databases: want a list of databases, each a map with a name "+
			"and its settings (e.g. - name: billing\\n  database-url: postgres://...)", path, v.Line)
	}
	var entries []databaseEntry
	seen := map[string]int{}
	for i, item := range v.Content {
		e := databaseEntry{index: i, path: path, line: item.Line}
		if item.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s: want a map with a name and the database's settings", e.where())
		}
		keyLine := map[string]int{}
		for j := 0; j+1 < len(item.Content); j += 2 {
			k, val := item.Content[j], item.Content[j+1]
			if first, dup := keyLine[k.Value]; dup {
				return nil, fmt.Errorf("%s: %s is set twice (line %d and line %d)", e.where(), k.Value, first, k.Line)
			}
			keyLine[k.Value] = k.Line
			if k.Value == "name" {
				e.name = val.Value
				continue
			}
			e.keys, e.items = append(e.keys, k), append(e.items, val)
		}
		if err := relay.CheckDatabaseName(e.name); err != nil {
			return nil, fmt.Errorf("%s: %w", e.where(), err)
		}
		if first, dup := seen[e.name]; dup {
			return nil, fmt.Errorf("%s: name %s is databases[%d]'s too; give each database a name of its own", e.where(), e.name, first)
		}
		seen[e.name] = i
		entries = append(entries, e)
	}
	return entries, nil
}

// Databases are the settings of each entry of the file's databases list, in its
// order: the top-level ones (file, environment and flags, as for a single
// database), with what the entry sets in their place. fs is the command's flags,
// loaded by Load.
func (s *Settings) Databases(fs *pflag.FlagSet) ([]*Settings, error) {
	all := make([]*Settings, len(s.databases))
	for i := range s.databases {
		e := &s.databases[i]
		d := New()
		d.entry, d.where, d.Authenticate = e.name, e.where(), s.Authenticate
		if err := d.Load(fs); err != nil {
			return nil, err
		}
		if err := d.applyEntry(e, fs); err != nil {
			return nil, err
		}
		all[i] = d
	}
	if fs.Lookup("slot") != nil { // a command that streams or reads the slots
		if err := checkSlotClashes(s.databases, all); err != nil {
			return nil, err
		}
	}
	return all, nil
}

// Name is the name of the databases entry these settings are (Databases'), or ""
// for the top level's.
func (s *Settings) Name() string { return s.entry }

// Where is the place in the file of the databases entry these settings are, and its
// name, for prefixing the entry's errors: "config file F, line N: databases[I] (name)".
func (s *Settings) Where() string { return s.where }

// DatabaseNames are the names of the file's databases, in its order.
func (s *Settings) DatabaseNames() []string {
	names := make([]string, len(s.databases))
	for i, e := range s.databases {
		names[i] = e.name
	}
	return names
}

// applyEntry sets what entry e sets over d's top-level settings.
func (d *Settings) applyEntry(e *databaseEntry, fs *pflag.FlagSet) error {
	for j, k := range e.keys {
		key, v := k.Value, e.items[j]
		at := fmt.Sprintf("%s: %s", e.whereAt(k.Line), key)
		var raw any
		if err := v.Decode(&raw); err != nil {
			return fmt.Errorf("%s: %w", at, err)
		}
		switch {
		case key == "tables":
			tables, err := parseTables(raw)
			if err != nil {
				return fmt.Errorf("%s: %w", at, err)
			}
			d.Relay.Tables = tables
			continue
		case key == "databases":
			return fmt.Errorf("%s: a database cannot list databases of its own; list every database at the top level", at)
		case slices.Contains(processSettings, key):
			return fmt.Errorf("%s: %s is the whole process's, not one database's; set it at the top level of the file", at, key)
		}
		st := d.lookup(key)
		if st == nil {
			hint := "keys are the flag names, e.g. database-url"
			if near := suggest.Nearest(key, append(d.names(), "tables", "name")); near != "" {
				hint = "did you mean " + near + "?"
			}
			return fmt.Errorf("%s: unknown setting (%s)", at, hint)
		}
		if fs.Lookup(key) == nil {
			continue // a setting of another subcommand
		}
		if err := st.set(yamlString(raw)); err != nil {
			return fmt.Errorf("%s: %w", at, err)
		}
		if key == "table" {
			d.Relay.Tables = nil // the entry's one table, not the top-level list
		}
	}
	if err := d.authenticate(); err != nil { // for the entry's database-url
		return fmt.Errorf("%s: %w", e.where(), err)
	}
	return nil
}

// checkSlotClashes refuses two databases streamed through slots of one name on
// one server: slot names are the cluster's, not the database's, so the second
// would find the first's slot taken (or, created in another database, not its own).
func checkSlotClashes(entries []databaseEntry, all []*Settings) error {
	type slotAt struct{ server, slot string }
	first := map[slotAt]int{}
	for i, d := range all {
		if d.Relay.Mode == relay.ModePoll {
			continue // no slot
		}
		k := slotAt{serverOf(d.Relay.DatabaseURL), d.Relay.Slot}
		if k.server == "" {
			continue // the URL is refused later, with its own error
		}
		if j, clash := first[k]; clash {
			return fmt.Errorf("%s: slot %s is databases[%d] (%s)'s too, on the same server %s; slot names are the whole server's, "+
				"so give this database a slot of its own, e.g. slot: %s_%s", entries[i].where(), k.slot, j, entries[j].name, k.server,
				k.slot, strings.ReplaceAll(entries[i].name, "-", "_"))
		}
		first[k] = i
	}
	return nil
}

// serverOf is the server a database URL names (its hosts and ports), or "" when it
// does not parse.
func serverOf(dbURL string) string {
	if dbURL == "" {
		return ""
	}
	pc, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		return ""
	}
	hosts := []string{fmt.Sprintf("%s:%d", pc.Host, pc.Port)}
	for _, fb := range pc.Fallbacks {
		if h := fmt.Sprintf("%s:%d", fb.Host, fb.Port); !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return strings.Join(hosts, ",")
}
