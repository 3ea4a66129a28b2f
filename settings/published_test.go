package settings_test

import (
	"log/slog"
	"testing"

	"github.com/spf13/pflag"

	"github.com/walrelay/walrelay/settings"
)

// The relay's configuration says how its sink makes records (for the admin API's
// /status and dead-letter preview), and the listener's options carry the trusted
// proxies.
func TestConfigSaysHowRecordsAreMade(t *testing.T) {
	s := newLoaded(t, "--database-url", "postgres://relay@db/app", "--kafka-brokers", "broker:9092",
		"--topic-template", "events.{event_type}", "--record-headers", "debezium",
		"--admin-trusted-proxies", "10.0.0.0/8, 192.0.2.7")
	cfg, err := s.CheckedConfig(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Published; p.Sink != "kafka" || p.TopicTemplate != "events.{event_type}" || !p.Format.IDHeaderOnly {
		t.Errorf("Published = %+v, want the kafka sink, its topic template and the debezium headers' format", p)
	}
	if got := s.Admin.TrustedProxies; len(got) != 2 || got[0] != "10.0.0.0/8" || got[1] != "192.0.2.7" {
		t.Errorf("Admin.TrustedProxies = %q", got)
	}
	bad := newLoaded(t, "--database-url", "postgres://relay@db/app", "--kafka-brokers", "broker:9092",
		"--admin-trusted-proxies", "proxy.internal")
	if _, err := bad.CheckedConfig(slog.New(slog.DiscardHandler)); err == nil {
		t.Errorf("admin-trusted-proxies proxy.internal: no error, want one asking for an address")
	}
}

// newLoaded is run's settings loaded from args.
func newLoaded(t *testing.T, args ...string) *settings.Settings {
	t.Helper()
	s := settings.New()
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	s.Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(fs); err != nil {
		t.Fatal(err)
	}
	return s
}
