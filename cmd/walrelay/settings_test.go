package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"

	"github.com/walrelay/walrelay/sink/sinks"
)

// Settings precedence is a pure function of flags, environment and file: flags over
// environment over file over defaults, the file named by --config or WALRELAY_CONFIG.
// Values only the file sets are read even where its slot loses.
func TestSettingsPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "walrelay.yaml")
	if err := os.WriteFile(file, []byte("database-url: postgres://relay@db/app\n"+
		"kafka-brokers:\n  - k1:9092\n  - k2:9092\nslot: a\nslot-failover: false\nsink: kafka\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		configByEnv bool // WALRELAY_CONFIG instead of --config
		env         bool // WALRELAY_SLOT=b
		flag        bool // --slot c
		want        string
	}{
		{name: "file", want: "a"},
		{name: "env over file", configByEnv: true, env: true, want: "b"},
		{name: "flag over env and file", env: true, flag: true, want: "c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			if tc.configByEnv {
				t.Setenv("WALRELAY_CONFIG", file)
			} else {
				args = append(args, "--config", file)
			}
			if tc.env {
				t.Setenv("WALRELAY_SLOT", "b")
			}
			if tc.flag {
				args = append(args, "--slot", "c")
			}
			s := newSettings()
			fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
			s.register(fs)
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			if err := s.load(fs); err != nil {
				t.Fatal(err)
			}
			if s.relay.Slot != tc.want {
				t.Errorf("slot %q, want %q", s.relay.Slot, tc.want)
			}
			if s.relay.DatabaseURL != "postgres://relay@db/app" || len(s.sinks.Kafka.Brokers) != 2 ||
				s.relay.SlotFailover || s.sinks.Kind != sinks.Kafka {
				t.Errorf("file-only values not loaded: %q %v failover=%v sink=%s",
					s.relay.DatabaseURL, s.sinks.Kafka.Brokers, s.relay.SlotFailover, s.sinks.Kind)
			}
			if s.relay.Table != "outbox_events" {
				t.Errorf("table %q, want the default outbox_events", s.relay.Table)
			}
		})
	}
}
