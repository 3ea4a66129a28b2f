package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// The help of every command and the answers to usage errors are golden files in
// testdata/cli: a change to a flag, a default or a usage line shows in review. Run
// `go test ./cmd/walrelay -run TestGoldenCLI -update` to rewrite them.
func TestGoldenCLI(t *testing.T) {
	cases := []struct {
		file string
		args []string
		code int
	}{
		{"help.txt", []string{"--help"}, 0},
		{"help-run.txt", []string{"run", "--help"}, 0},
		{"help-migrate.txt", []string{"migrate", "--help"}, 0},
		{"help-status.txt", []string{"status", "--help"}, 0},
		{"help-replay.txt", []string{"replay", "--help"}, 0},
		{"help-dlq.txt", []string{"dlq", "--help"}, 0},
		{"help-dlq-list.txt", []string{"dlq", "list", "--help"}, 0},
		{"help-dlq-retry.txt", []string{"dlq", "retry", "--help"}, 0},
		{"help-dlq-purge.txt", []string{"dlq", "purge", "--help"}, 0},
		{"help-import-debezium.txt", []string{"import-debezium", "--help"}, 0},
		{"help-version.txt", []string{"version", "--help"}, 0},
		{"usage-unknown-flag.txt", []string{"status", "--slott", "x"}, 2},
		{"usage-unknown-flag-run.txt", []string{"run", "--slott", "x"}, 2},
		{"usage-unknown-command.txt", []string{"stauts"}, 2},
		{"usage-unknown-dlq-command.txt", []string{"dlq", "lsit"}, 2},
		{"usage-extra-argument.txt", []string{"dlq", "list", "extra"}, 2},
		{"usage-missing-value.txt", []string{"migrate", "--table"}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := execute(context.Background(), tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("walrelay %s: exit code %d, want %d\nstderr:\n%s", strings.Join(tc.args, " "), code, tc.code, stderr.String())
			}
			got := "$ walrelay " + strings.Join(tc.args, " ") + "\n" + stdout.String() + stderr.String()
			path := filepath.Join("testdata", "cli", tc.file)
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("walrelay %s differs from %s (run with -update if the change is meant):\n%s",
					strings.Join(tc.args, " "), path, lineDiff(string(want), got))
			}
		})
	}
}

// lineDiff lists the lines of want and got that differ, by line number.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("line " + strconv.Itoa(i+1) + ":\n  want " + wl + "\n  got  " + gl + "\n")
		}
	}
	return b.String()
}
