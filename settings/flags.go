package settings

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Kinds of setting, as the flag help shows them (pflag prints a flag's Type() after
// its name, and nothing for a bool).
const (
	kindString   = "string"
	kindDuration = "duration"
	kindInt      = "int"
	kindBytes    = "bytes"
	kindBool     = "bool"
	kindList     = "list"
	// kindURL and kindURLs (a comma-separated list) are where a server is reached: a
	// URL, keyword/value string or host:port that may carry a password, a token or
	// a secret parameter. Wherever one is shown it is redacted (internal/redact).
	kindURL  = "url"
	kindURLs = "urls"
)

// settingValue is a setting's flag: it keeps the text, which Load applies after the
// file and the environment, and tells the help its kind.
type settingValue struct {
	text string
	kind string
}

func (v *settingValue) String() string     { return v.text }
func (v *settingValue) Set(s string) error { v.text = s; return nil }
func (v *settingValue) Type() string       { return v.kind }

// IsBoolFlag lets --name alone mean true.
func (v *settingValue) IsBoolFlag() bool { return v.kind == kindBool }

// byteUnits are the suffixes a bytes setting takes: SI and binary multiples.
var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}, {"KB", 1e3}, {"B", 1},
}

// parseBytes reads a size: a whole number of bytes, optionally with a unit
// (64MiB, 1MB, 512KiB).
func parseBytes(v string) (int64, error) {
	text := strings.TrimSpace(v)
	mult := int64(1)
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(text, u.suffix); ok {
			text, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("want a size in bytes like 1048576, 64MiB or 1MB, got %q", v)
	}
	return n * mult, nil
}

// formatBytes writes n in the largest binary unit that divides it.
func formatBytes(n int64) string {
	for _, u := range byteUnits[:3] {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
