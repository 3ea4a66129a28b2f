package settings_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/walrelay/walrelay/settings"
)

// FuzzConfigFile feeds arbitrary bytes as the --config file and arbitrary words as
// flags: loading and validating may fail, with an error, but never panic.
func FuzzConfigFile(f *testing.F) {
	f.Add([]byte("database-url: postgres://u:p@db:5432/app\nkafka-brokers: [k1:9092, k2:9092]\nslot: s1\n"), "--status-interval 100ms")
	f.Add([]byte("max-inflight-events: 10\nmode: poll\non-publish: delete\n"), "--max-attempts=3 --kafka-tls")
	f.Add([]byte("kafka-brokers:\n  - a:1\n  - {b: c}\nretention: 1h\n"), "--table a.b.c")
	f.Add([]byte("{not yaml"), "--nope")
	f.Add([]byte("status-interval: [1, 2]\n"), "--log-level loud")
	f.Add([]byte("- just\n- a list\n"), "")
	f.Add([]byte("slot: s\ndatabases:\n  - name: a\n    database-url: postgres://h/a\n    tables:\n      - table: x\n  - name: b\n    slot: t\n"), "--slot u")
	f.Fuzz(func(t *testing.T, file []byte, args string) {
		path := filepath.Join(t.TempDir(), "walrelay.yaml")
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}
		s := settings.New()
		fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
		fs.SetOutput(nopWriter{})
		s.Register(fs)
		fs.String("database", "", "")
		if err := fs.Parse(append(strings.Fields(args), "--config", path)); err != nil {
			return
		}
		if err := s.Load(fs); err != nil {
			return
		}
		if _, err := s.Logger(); err != nil {
			return
		}
		_ = s.Relay.Validate()
		_ = s.Admin.Validate()
		if len(s.DatabaseNames()) > 0 {
			dbs, err := s.Databases(fs)
			if err != nil {
				return
			}
			for _, d := range dbs {
				_, _ = d.CheckedConfig(slog.New(slog.NewTextHandler(nopWriter{}, nil)))
			}
		}
	})
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
