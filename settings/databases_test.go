package settings_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/walrelay/walrelay/internal/redact"
	"github.com/walrelay/walrelay/settings"
)

// loadDatabases loads a config file with a databases list as run does, with args.
func loadDatabases(t *testing.T, file string, args ...string) ([]*settings.Settings, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "walrelay.yaml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	s := settings.New()
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	s.Register(fs)
	fs.String("database", "", "")
	if err := fs.Parse(append([]string{"--config", path}, args...)); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(fs); err != nil {
		return nil, err
	}
	return s.Databases(fs)
}

// Each entry inherits the top-level settings (file, environment, flags) and its own
// win; an entry's table replaces a top-level tables list.
func TestDatabasesInherit(t *testing.T) {
	t.Setenv("WALRELAY_PUBLICATION", "from_env")
	dbs, err := loadDatabases(t, `
kafka-brokers: k:9092
slot: shared
topic-template: top.{aggregate_type}
tables:
  - table: a.outbox
  - table: b.outbox
databases:
  - name: orders
    database-url: postgres://u@h1:5432/orders
  - name: billing
    database-url: postgres://u@h1:5432/billing
    slot: billing_slot
    table: billing.outbox
    kafka-brokers: other:9092
`, "--max-attempts", "7")
	if err != nil {
		t.Fatal(err)
	}
	o, b := dbs[0], dbs[1]
	if o.Name() != "orders" || o.Relay.Slot != "shared" || o.Relay.Publication != "from_env" || o.Relay.Retry.MaxAttempts != 7 ||
		o.Sinks.TopicTemplate != "top.{aggregate_type}" || len(o.Relay.Tables) != 2 || o.Sinks.Kafka.Brokers[0] != "k:9092" {
		t.Errorf("orders: %+v, want every top-level setting inherited", o.Relay)
	}
	if b.Relay.Slot != "billing_slot" || b.Relay.Table != "billing.outbox" || len(b.Relay.Tables) != 0 ||
		b.Sinks.Kafka.Brokers[0] != "other:9092" || b.Relay.Retry.MaxAttempts != 7 || b.Relay.DatabaseURL != "postgres://u@h1:5432/billing" {
		t.Errorf("billing: slot %s, table %s, tables %d, brokers %v: want its own values over the top level's",
			b.Relay.Slot, b.Relay.Table, len(b.Relay.Tables), b.Sinks.Kafka.Brokers)
	}
}

// The broker probe's interval is a database's: each entry's relay probes its own
// broker at the top level's interval or at its own (0: none).
func TestDatabasesBrokerProbeInterval(t *testing.T) {
	dbs, err := loadDatabases(t, `
kafka-brokers: k:9092
broker-probe-interval: 2s
databases:
  - name: orders
    database-url: postgres://u@h1:5432/orders
  - name: billing
    database-url: postgres://u@h1:5432/billing
    slot: billing_slot
    broker-probe-interval: 0s
`)
	if err != nil {
		t.Fatal(err)
	}
	if got := dbs[0].Relay.BrokerProbeInterval; got != 2*time.Second {
		t.Errorf("orders: broker probe interval %s, want the top level's 2s", got)
	}
	if got := dbs[1].Relay.BrokerProbeInterval; got != 0 {
		t.Errorf("billing: broker probe interval %s, want its own 0s", got)
	}
	if got := settings.New().Relay.BrokerProbeInterval; got != 5*time.Second {
		t.Errorf("default broker probe interval %s, want 5s", got)
	}
}

// What an entry may not set, and lists that cannot run, are refused naming the entry
// and saying what to do.
func TestDatabasesRefused(t *testing.T) {
	cases := []struct{ name, file, want string }{
		{"no name", "databases:\n  - database-url: postgres://h/a\n", "databases[0]: name is missing"},
		{"bad name", "databases:\n  - name: Billing\n", `databases[0] (Billing): name "Billing": use lowercase letters, digits, _ and - only, e.g. billing`},
		{"duplicate name", "databases:\n  - name: a\n  - name: a\n", "databases[1] (a): name a is databases[0]'s too"},
		{"process setting", "databases:\n  - name: a\n    metrics-addr: :1\n", "line 3: databases[0] (a): metrics-addr: metrics-addr is the whole process's, not one database's; set it at the top level"},
		{"unknown key", "databases:\n  - name: a\n    slott: x\n", "databases[0] (a): slott: unknown setting (did you mean slot?)"},
		{"nested list", "databases:\n  - name: a\n    databases: []\n", "a database cannot list databases of its own"},
		{"not a list", "databases: x\n", "databases: want a list of databases"},
		{"bad value", "databases:\n  - name: a\n    max-attempts: many\n", `databases[0] (a): max-attempts: want a whole number, got "many"`},
		{"slot clash on one server", "slot: s\ndatabases:\n  - name: a\n    database-url: postgres://u@h:5432/a\n  - name: b-2\n    database-url: postgres://u@h:5432/b\n",
			"databases[1] (b-2): slot s is databases[0] (a)'s too, on the same server h:5432; slot names are the whole server's, so give this database a slot of its own, e.g. slot: s_b_2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadDatabases(t, c.file)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
	// One slot name on two servers is no clash.
	if _, err := loadDatabases(t, "slot: s\ndatabases:\n  - name: a\n    database-url: postgres://u@h1:5432/a\n  - name: b\n    database-url: postgres://u@h2:5432/a\n"); err != nil {
		t.Errorf("one slot name on two servers: %v, want no error", err)
	}
}

// A databases entry's URL settings are noted like the top level's.
func TestDatabaseEntryURLsAreRedacted(t *testing.T) {
	const url = "postgres://relay:EntryPW9secret@h1:5432/orders"
	dbs, err := loadDatabases(t, `
kafka-brokers: k:9092
databases:
  - name: orders
    database-url: `+url+`
    primary-url: host=p user=relay password=EntryKV9secret
`)
	if err != nil {
		t.Fatal(err)
	}
	if dbs[0].Relay.DatabaseURL != url {
		t.Fatalf("database-url = %q, want the entry's", dbs[0].Relay.DatabaseURL)
	}
	msg := redact.Error(fmt.Errorf("connect %s; primary %s", url, dbs[0].Relay.PrimaryURL), settings.LoadedURLs()...).Error()
	for _, secret := range []string{"EntryPW9secret", "EntryKV9secret"} {
		if strings.Contains(msg, secret) {
			t.Errorf("the error shows %s: %s", secret, msg)
		}
	}
	if !strings.Contains(msg, "postgres://relay:xxxxx@h1:5432/orders") {
		t.Errorf("the error lost the URL's shape (user, host, database): %s", msg)
	}
}
