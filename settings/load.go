package settings

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/walrelay/walrelay/internal/suggest"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/relay"
)

// Register adds the named settings (all when none are named, but those of one
// subcommand) and --config to fs as flags. Flag values are only strings here; they
// are applied in Load, after file and env.
func (s *Settings) Register(fs *pflag.FlagSet, names ...string) {
	fs.String("config", "", "YAML file with settings (keys are the flag names); env WALRELAY_CONFIG")
	for _, st := range s.all {
		if len(names) == 0 && !st.only || contains(names, st.name) {
			kind := st.kind
			if kind == "" {
				kind = kindString
			}
			fs.Var(&settingValue{text: st.def, kind: kind}, st.name, st.usage+"; env "+envName(st.name))
			if kind == kindBool {
				fs.Lookup(st.name).NoOptDefVal = "true"
			}
		}
	}
}

// Load applies the file (--config or WALRELAY_CONFIG), then the environment, then the
// flags the user set, each only for the settings fs has; then Authenticate.
func (s *Settings) Load(fs *pflag.FlagSet) error {
	s.Warnings = unknownEnv(os.Environ(), s.names())
	path, _ := fs.GetString("config")
	if path == "" {
		path = os.Getenv("WALRELAY_CONFIG")
	}
	if path != "" {
		if err := s.loadFile(path, fs); err != nil {
			return err
		}
	}
	for _, st := range s.all {
		if fs.Lookup(st.name) == nil {
			continue
		}
		if v, ok := os.LookupEnv(envName(st.name)); ok {
			if err := st.set(v); err != nil {
				return fmt.Errorf("%s: %w", envName(st.name), err)
			}
		}
	}
	for _, st := range s.all {
		if f := fs.Lookup(st.name); f != nil && f.Changed {
			if err := st.set(f.Value.String()); err != nil {
				return fmt.Errorf("--%s: %w", st.name, err)
			}
		}
	}
	return s.authenticate()
}

// authenticate calls the Authenticate hook, if any.
func (s *Settings) authenticate() error {
	if s.Authenticate == nil {
		return nil
	}
	return s.Authenticate(s)
}

func (s *Settings) loadFile(path string, fs *pflag.FlagSet) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("config file %s: %w", path, yamlLines(err))
	}
	if len(doc.Content) == 0 {
		return nil // empty, or comments only
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return fmt.Errorf("config file %s, line %d: want settings as keys and values (keys are the flag names, e.g. database-url: ...)", path, top.Line)
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		key := k.Value
		at := fmt.Sprintf("config file %s, line %d", path, k.Line)
		if first, dup := seen[key]; dup {
			return fmt.Errorf("%s: %s is set twice (first on line %d)", at, key, first)
		}
		seen[key] = k.Line
		var raw any
		if err := v.Decode(&raw); err != nil {
			return fmt.Errorf("%s: %s: %w", at, key, err)
		}
		if key == "databases" {
			if fs.Lookup("database") == nil || s.entry != "" {
				continue // a subcommand of one database, or one entry's settings
			}
			entries, err := parseDatabases(path, v)
			if err != nil {
				return err
			}
			s.databases = entries
			continue
		}
		if key == "tables" {
			if fs.Lookup("table") == nil {
				continue // a subcommand that works on one table
			}
			tables, err := parseTables(raw)
			if err != nil {
				return fmt.Errorf("%s: tables: %w", at, err)
			}
			s.Relay.Tables = tables
			continue
		}
		st := s.lookup(key)
		if st == nil {
			hint := "keys are the flag names, e.g. database-url"
			if near := suggest.Nearest(key, append(s.names(), "tables", "databases")); near != "" {
				hint = "did you mean " + near + "?"
			}
			return fmt.Errorf("%s: unknown setting %q (%s)", at, key, hint)
		}
		if fs.Lookup(key) == nil {
			continue // a setting of another subcommand: one file serves them all
		}
		if err := st.set(yamlString(raw)); err != nil {
			return fmt.Errorf("%s: %s: %w", at, key, err)
		}
	}
	return nil
}

// lookup returns the setting called name, or nil.
func (s *Settings) lookup(name string) *setting {
	for i := range s.all {
		if s.all[i].name == name {
			return &s.all[i]
		}
	}
	return nil
}

// DefaultNames are the names of the settings Register adds when given none.
func (s *Settings) DefaultNames() []string {
	var names []string
	for _, st := range s.all {
		if !st.only {
			names = append(names, st.name)
		}
	}
	return names
}

// names lists every setting's name and "config".
func (s *Settings) names() []string {
	names := []string{"config"}
	for _, st := range s.all {
		names = append(names, st.name)
	}
	return names
}

// tableKeys are the keys of an entry of the file's tables list.
var tableKeys = []string{"table", "column-id", "column-aggregate-type", "column-aggregate-id", "column-event-type",
	"column-payload", "column-created-at", "column-headers", "column-envelope", "column-partition", "column-trace", "topic-template",
	"topic-regex", "topic-replacement"}

// parseTables reads the file's tables list: several outbox tables streamed through one
// slot, each a map of tableKeys. Columns not named are the article's (walrelay's own
// table); column-created-at "" means the table has none.
func parseTables(raw any) ([]relay.TableConfig, error) {
	list, ok := raw.([]any)
	if !ok || len(list) == 0 {
		return nil, errors.New("want a list of tables, each with at least a table key")
	}
	var tables []relay.TableConfig
	for i, item := range list {
		entry, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("entry %d: want a map with keys %s", i+1, strings.Join(tableKeys, ", "))
		}
		t := relay.TableConfig{Columns: outbox.DefaultColumns()}
		fields := map[string]*string{"table": &t.Table, "column-id": &t.Columns.ID,
			"column-aggregate-type": &t.Columns.AggregateType, "column-aggregate-id": &t.Columns.AggregateID,
			"column-event-type": &t.Columns.EventType, "column-payload": &t.Columns.Payload,
			"column-created-at": &t.Columns.CreatedAt, "topic-template": &t.TopicTemplate,
			"topic-regex": &t.TopicRegex, "topic-replacement": &t.TopicReplacement,
			"column-partition": &t.Columns.Partition, "column-trace": &t.Columns.Trace}
		for key, v := range entry {
			if key == "column-headers" || key == "column-envelope" {
				text := ""
				if v != nil {
					text = yamlString(v)
				}
				dst := &t.Columns.Headers
				if key == "column-envelope" {
					dst = &t.Columns.Envelope
				}
				if err := setHeaderColumns(text, dst); err != nil {
					return nil, fmt.Errorf("entry %d: %w", i+1, err)
				}
				continue
			}
			p, known := fields[key]
			if !known {
				return nil, fmt.Errorf("entry %d: unknown key %q (keys: %s)", i+1, key, strings.Join(tableKeys, ", "))
			}
			if v == nil {
				*p = ""
			} else {
				*p = fmt.Sprint(v)
			}
		}
		if t.Table == "" {
			return nil, fmt.Errorf("entry %d: table is missing; name the outbox table, e.g. table: tenant_a.outbox", i+1)
		}
		tables = append(tables, t)
	}
	return tables, nil
}

// yamlString turns a YAML scalar or list into the text a flag would carry.
func yamlString(v any) string {
	if list, ok := v.([]any); ok {
		parts := make([]string, len(list))
		for i, item := range list {
			parts[i] = fmt.Sprint(item)
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(v)
}

func envName(name string) string {
	return "WALRELAY_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
