package pgcluster

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Options for a throwaway cluster. The zero value is fine.
type Options struct {
	// Port is the TCP port on 127.0.0.1; 0 picks a free one.
	Port int
	// Settings are extra postgresql.conf settings; they override the defaults
	// (see [DefaultSettings]). Values are written quoted, so "on", "10" and
	// "128MB" all work.
	Settings map[string]string
	// Logf receives progress lines; nil means silent.
	Logf func(format string, args ...any)
	// BinDir is the directory of initdb and postgres; "" means [BinDir]'s choice.
	// Tests that need a particular major version get it from [BinDirFor].
	BinDir string
}

var settingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

// Validate checks the options without touching the machine.
func (o Options) Validate() error {
	if o.Port < 0 || o.Port > 65535 {
		return fmt.Errorf("port %d out of range; use 1-65535, or 0 to pick a free port", o.Port)
	}
	for k, v := range o.Settings {
		if !settingName.MatchString(k) {
			return fmt.Errorf("setting name %q is not a postgresql.conf parameter name", k)
		}
		if strings.EqualFold(k, "port") {
			return fmt.Errorf("setting %q: set Options.Port instead", k)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return fmt.Errorf("setting %s: value must be a single line", k)
		}
	}
	return nil
}

// DefaultSettings returns the postgresql.conf settings every cluster gets
// before [Options.Settings] are applied. socketDir is the cluster directory.
func DefaultSettings(socketDir string) map[string]string {
	return map[string]string{
		"wal_level":               "logical",
		"max_wal_senders":         "20",
		"max_replication_slots":   "20",
		"fsync":                   "off",
		"synchronous_commit":      "off",
		"full_page_writes":        "off",
		"listen_addresses":        "127.0.0.1",
		"unix_socket_directories": socketDir,
		"shared_buffers":          "128MB",
		"max_connections":         "200",
		"logging_collector":       "off",
	}
}

// confLines renders settings as postgresql.conf lines, sorted by name.
func confLines(settings map[string]string) string {
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("\n# added by walrelay internal/pgcluster\n")
	for _, k := range keys {
		b.WriteString(k)
		b.WriteString(" = ")
		b.WriteString(quoteConf(settings[k]))
		b.WriteByte('\n')
	}
	return b.String()
}

// quoteConf quotes a value for postgresql.conf, where backslash escapes are
// processed inside single quotes.
func quoteConf(v string) string {
	v = strings.ReplaceAll(v, `\`, `\\`)
	v = strings.ReplaceAll(v, `'`, `''`)
	return "'" + v + "'"
}
