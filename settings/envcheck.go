package settings

import (
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"strings"

	"github.com/walrelay/walrelay/internal/suggest"
)

// harnessEnv are prefixes of variables the test harness reads, not walrelay.
var harnessEnv = []string{"WALRELAY_TEST_", "WALRELAY_PG_"}

// unknownEnv warns of each WALRELAY_* variable in environ that names no setting
// (a typo would otherwise be ignored in silence), with the nearest known name.
func unknownEnv(environ []string, names []string) []string {
	known := make(map[string]bool, len(names))
	envNames := make([]string, 0, len(names))
	for _, n := range names {
		known[envName(n)] = true
		envNames = append(envNames, envName(n))
	}
	var warnings []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "WALRELAY_") || known[name] || hasAnyPrefix(name, harnessEnv) {
			continue
		}
		w := fmt.Sprintf("environment variable %s is not a walrelay setting and is ignored", name)
		if near := suggest.Nearest(name, envNames); near != "" {
			w += "; did you mean " + near + "?"
		}
		warnings = append(warnings, w)
	}
	return warnings
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// Warn reports the settings' warnings: as log lines once there is a logger, else
// on w (stderr).
func (s *Settings) Warn(w io.Writer, logger *slog.Logger) {
	for _, msg := range s.Warnings {
		if logger != nil {
			logger.Warn(msg)
		} else {
			fmt.Fprintln(w, "walrelay: warning:", msg)
		}
	}
}

// yamlParserLine matches a yaml.v3 parser error with a line number.
var yamlParserLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlParserProblems are the problems yaml.v3's parser (not its scanner) reports. It
// gives their lines counted from 0, one less than the line they are on, where its
// scanner's and its decoder's count from 1 (gopkg.in/yaml.v3 decode.go, parser.fail).
var yamlParserProblems = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"did not find expected node content":     true,
	"did not find expected '-' indicator":    true,
	"did not find expected key":              true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"found undefined tag handle":             true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found duplicate %TAG directive":         true,
}

// yamlLines corrects the line of a yaml.v3 parser error.
func yamlLines(err error) error {
	m := yamlParserLine.FindStringSubmatch(err.Error())
	if m == nil || !yamlParserProblems[m[2]] {
		if p, ok := strings.CutPrefix(err.Error(), "yaml: "); ok && yamlParserProblems[p] {
			return fmt.Errorf("yaml: line 1: %s", p) // yaml.v3 leaves out a line 0
		}
		return err
	}
	n, _ := strconv.Atoi(m[1])
	return fmt.Errorf("yaml: line %d: %s", n+1, m[2])
}
