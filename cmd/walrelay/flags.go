package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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

// settingValue is a setting's flag: it keeps the text, which load applies after the
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

// usageError is a command line that does not parse: main prints the command's usage
// after it.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// flagError makes a flag that does not parse a usage error, naming the nearest flag
// the command has when the one given does not exist.
func flagError(cmd *cobra.Command, err error) error {
	var missing *pflag.NotExistError
	if errors.As(err, &missing) && missing.GetSpecifiedName() != "" {
		var names []string
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				names = append(names, f.Name)
			}
		})
		if near := nearest(missing.GetSpecifiedName(), names); near != "" {
			err = fmt.Errorf("%w (did you mean --%s?)", err, near)
		}
	}
	return usageError{err}
}

// usageArgs makes a command's argument errors usage errors.
func usageArgs(args cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := args(cmd, a); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// groupCommand makes c, a command that only holds subcommands, answer an unknown
// subcommand with a usage error naming the nearest one (cobra would print the help
// and exit 0), and print its help when run alone.
func groupCommand(c *cobra.Command) *cobra.Command {
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		var names []string
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				names = append(names, sub.Name())
			}
		}
		err := fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())
		if near := nearest(args[0], names); near != "" {
			err = fmt.Errorf("%w (did you mean %q?)", err, near)
		}
		return usageError{err}
	}
	c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	return c
}

// nearest returns the candidate closest to name by edit distance, when it is close
// enough to be a likely typo (at most 2 edits, or a quarter of the name), or "".
func nearest(name string, candidates []string) string {
	best, bestDist := "", math.MaxInt
	for _, c := range candidates {
		if d := editDistance(name, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	if bestDist <= max(2, len(name)/4) {
		return best
	}
	return ""
}

// editDistance is the Levenshtein distance between a and b, in bytes (names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

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
