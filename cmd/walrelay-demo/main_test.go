package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// execute runs the demo's command line in process; only paths that stop before the
// demo starts anything are exercised here (`make demo` runs the whole thing).
func execute(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestHelp(t *testing.T) {
	out, err := execute(t, "--help")
	if err != nil {
		t.Fatalf("--help: %v", err)
	}
	for _, w := range []string{"walrelay-demo [flags]", "--events", "--rate", "--verbose", "throwaway PostgreSQL"} {
		if !strings.Contains(out, w) {
			t.Errorf("help does not mention %q:\n%s", w, out)
		}
	}
}

// TestBadUsage checks that bad flags are usage errors (exit 2 in main), not runtime
// failures, and are reported before any cluster is started.
func TestBadUsage(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--events", "0"}, "--events must be positive"},
		{[]string{"--rate", "-1"}, "--rate must not be negative"},
		{[]string{"--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"extra"}, `"extra"`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := execute(t, tc.args...)
			if err == nil {
				t.Fatal("no error")
			}
			if errors.As(err, new(runtimeError)) {
				t.Errorf("%v is a runtime error (exit 1); want a usage error (exit 2)", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}
