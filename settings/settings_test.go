package settings_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/settings"
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
			s := settings.New()
			fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
			s.Register(fs)
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			if err := s.Load(fs); err != nil {
				t.Fatal(err)
			}
			if s.Relay.Slot != tc.want {
				t.Errorf("slot %q, want %q", s.Relay.Slot, tc.want)
			}
			if s.Relay.DatabaseURL != "postgres://relay@db/app" || len(s.Sinks.Kafka.Brokers) != 2 ||
				s.Relay.SlotFailover || s.Sinks.Kind != sinks.Kafka {
				t.Errorf("file-only values not loaded: %q %v failover=%v sink=%s",
					s.Relay.DatabaseURL, s.Sinks.Kafka.Brokers, s.Relay.SlotFailover, s.Sinks.Kind)
			}
			if s.Relay.Table != "outbox_events" {
				t.Errorf("table %q, want the default outbox_events", s.Relay.Table)
			}
		})
	}
}

// The file's tables list configures several outbox tables, each with its own columns
// (the article's where not named) and topic template; the relay's checks reject a
// table listed twice and an entry with an unknown key.
func TestSettingsTables(t *testing.T) {
	load := func(t *testing.T, yaml string) (*settings.Settings, error) {
		t.Helper()
		file := filepath.Join(t.TempDir(), "walrelay.yaml")
		if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		s := settings.New()
		fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
		s.Register(fs)
		if err := fs.Parse([]string{"--config", file}); err != nil {
			t.Fatal(err)
		}
		return s, s.Load(fs)
	}
	s, err := load(t, `database-url: postgres://relay@db/app
tables:
  - table: outbox_events
  - table: tenant_b.outbox
    column-aggregate-type: aggregatetype
    column-aggregate-id: aggregateid
    column-event-type: type
    column-created-at: ""
    column-headers: tenant_id:tenant,region
    column-partition: part
    column-trace: tracingspancontext
    topic-template: tenant_b.{aggregate_type}
`)
	if err != nil {
		t.Fatal(err)
	}
	want := []relay.TableConfig{
		{Table: "outbox_events", Columns: outbox.DefaultColumns()},
		{Table: "tenant_b.outbox", Columns: outbox.Columns{ID: "id", AggregateType: "aggregatetype", AggregateID: "aggregateid",
			EventType: "type", Payload: "payload", Headers: []outbox.HeaderColumn{{Column: "tenant_id", Header: "tenant"}, {Column: "region"}},
			Partition: "part", Trace: "tracingspancontext"}, TopicTemplate: "tenant_b.{aggregate_type}"},
	}
	if !reflect.DeepEqual(s.Relay.Tables, want) {
		t.Fatalf("tables %+v, want %+v", s.Relay.Tables, want)
	}
	if err := s.Relay.Validate(); err != nil {
		t.Fatalf("valid tables rejected: %v", err)
	}

	s, err = load(t, "database-url: postgres://relay@db/app\ntables:\n  - table: outbox_events\n  - table: public.outbox_events\n")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Relay.Validate(); err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Fatalf("a table listed twice: %v, want an error saying so", err)
	}
	if _, err := load(t, "tables:\n  - table: a\n    column-idd: x\n"); err == nil || !strings.Contains(err.Error(), `unknown key "column-idd"`) {
		t.Fatalf("unknown key: %v, want an error naming it", err)
	}
	if _, err := load(t, "tables:\n  - column-id: x\n"); err == nil || !strings.Contains(err.Error(), "table is missing") {
		t.Fatalf("entry without table: %v, want an error saying so", err)
	}
}

// Header columns come from a flag as column:header pairs; a partition column with a
// sink that has no partitions is refused before anything connects.
func TestSettingsPlacedColumns(t *testing.T) {
	s := settings.New()
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	s.Register(fs)
	if err := fs.Parse([]string{"--database-url", "postgres://relay@db/app", "--column-headers", "tenant_id:tenant, region",
		"--column-partition", "part", "--sink", "nats", "--nats-url", "nats://127.0.0.1:4222"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(fs); err != nil {
		t.Fatal(err)
	}
	want := []outbox.HeaderColumn{{Column: "tenant_id", Header: "tenant"}, {Column: "region"}}
	if !reflect.DeepEqual(s.Relay.Columns.Headers, want) || s.Relay.Columns.Trace != outbox.DefaultTraceColumn {
		t.Fatalf("headers %+v trace %q, want %+v and the default trace column", s.Relay.Columns.Headers, s.Relay.Columns.Trace, want)
	}
	if _, err := s.RelayConfig(t.Context(), slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "partitions are Kafka's") {
		t.Fatalf("column-partition with --sink nats: %v, want an error saying partitions are Kafka's", err)
	}
	if err := fs.Set("column-headers", "tenant_id:a:b"); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(fs); err == nil || !strings.Contains(err.Error(), "--column-headers") {
		t.Fatalf("a bad column-headers entry: %v, want an error naming the flag", err)
	}
}

// --sink sqs is checked before anything connects: exactly-once is Kafka's, queue
// names must be SQS's, and the headers must fit SQS's 10 message attributes.
func TestSettingsSQS(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // "" means valid
	}{
		{"fifo", []string{"--topic-template", "outbox-{aggregate_type}.fifo"}, ""},
		{"exactly-once", []string{"--topic-template", "outbox.fifo", "--delivery", "exactly-once"}, "exactly-once needs --sink kafka"},
		{"kafka's template", nil, "SQS queue names allow letters, digits, '-' and '_' only"},
		{"two header columns", []string{"--topic-template", "outbox", "--column-headers", "a,b"}, ""},
		{"three header columns", []string{"--topic-template", "outbox", "--column-headers", "a,b,c"}, "place at most 2 columns as headers"},
		{"three without trace", []string{"--topic-template", "outbox", "--column-headers", "a,b,c", "--column-trace", ""}, ""},
		{"bad endpoint", []string{"--topic-template", "outbox", "--sqs-endpoint", "localhost:9324"}, "sqs endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := settings.New()
			fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
			s.Register(fs)
			args := append([]string{"--database-url", "postgres://relay@db/app", "--sink", "sqs", "--sqs-region", "eu-west-1"}, tc.args...)
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			if err := s.Load(fs); err != nil {
				t.Fatal(err)
			}
			cfg, err := s.RelayConfig(t.Context(), slog.New(slog.DiscardHandler))
			if cfg.Sink != nil {
				cfg.Sink.Close()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
}

// A config file's errors name the line they are on: yaml.v3's parser counts its
// lines from 0 (a flow collection left open on line 2 reads "line 1"); the
// scanner's and the decoder's, and walrelay's own, are already right.
func TestConfigFileErrorLines(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
	}{
		{"flow mapping open on line 2", "slot: a\nmode: {x\n", "line 2: did not find expected ',' or '}'"},
		{"flow sequence open on line 3", "slot: a\nmode: poll\ntables: [\n  {table: b}\nkafka-tls: true\n", "line 3: did not find expected ',' or ']'"},
		{"block mapping broken on line 3", "slot: a\nmode: poll\n- x\n", "line 3: did not find expected key"},
		{"indentation on line 2 (scanner)", "slot: a\n\tmode: poll\n", "line 2: found a tab character"},
		{"mapping in a value on line 3 (scanner)", "slot: a\nmode: poll\nslot-failover: x: y\n", "line 3: mapping values are not allowed"},
		{"unknown key on line 3", "slot: a\n\nslott: b\n", `line 3: unknown setting "slott" (did you mean slot?)`},
		{"bad value on line 2", "slot: a\nstatus-interval: soon\n", `line 2: status-interval: want a duration`},
		{"key set twice", "slot: a\nmode: poll\nslot: b\n", "line 3: slot is set twice (first on line 1)"},
		{"not a map", "- a\n- b\n", "line 1: want settings as keys and values"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "walrelay.yaml")
			if err := os.WriteFile(file, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			s := settings.New()
			fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
			s.Register(fs)
			if err := fs.Parse([]string{"--config", file}); err != nil {
				t.Fatal(err)
			}
			err := s.Load(fs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

// A header column may take a key walrelay's own headers use only where walrelay
// sets that header: under record-headers debezium it sets id alone, so
// event_type, aggregate_type, aggregate_id and created_at are the columns' (as in
// an imported Debezium configuration placing type:header:event_type); id,
// payload, tombstone, Nats-Msg-Id, traceparent and tracestate stay walrelay's.
func TestSettingsHeaderKeysByRecordHeaders(t *testing.T) {
	for _, tc := range []struct {
		recordHeaders, headers, want string // want "" means valid
	}{
		{"debezium", "type:event_type,aggregatetype:aggregate_type,aggregateid:aggregate_id,ts:created_at", ""},
		{"walrelay", "type:event_type", `header "event_type" is one walrelay sets itself under record-headers walrelay`},
		{"walrelay", "ts:Created_At", `header "Created_At" is one walrelay sets itself`},
		{"walrelay", "type:kind", ""},
		{"debezium", "event:id", `header "id" is one walrelay sets itself`},
		{"debezium", "body:payload", `header "payload" is one walrelay sets itself`},
		{"debezium", "gone:tombstone", `header "tombstone" is one walrelay sets itself`},
		{"debezium", "n:Nats-Msg-Id", `header "Nats-Msg-Id" is one walrelay sets itself`},
		{"debezium", "tp:traceparent", `header "traceparent" is one walrelay sets itself`},
		{"debezium", "ts:tracestate", `header "tracestate" is one walrelay sets itself`},
	} {
		t.Run(tc.recordHeaders+" "+tc.headers, func(t *testing.T) {
			s := settings.New()
			fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
			s.Register(fs)
			if err := fs.Parse([]string{"--database-url", "postgres://relay@db/app", "--kafka-brokers", "broker:9092",
				"--record-headers", tc.recordHeaders, "--column-headers", tc.headers}); err != nil {
				t.Fatal(err)
			}
			err := s.Load(fs)
			if err == nil {
				_, err = s.CheckedConfig(slog.New(slog.DiscardHandler))
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
}
