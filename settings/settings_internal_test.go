package settings

import (
	"reflect"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/sink/sinks"
)

// An unknown WALRELAY_* variable is a warning naming the nearest setting; known
// ones, other variables and the test harness's are not.
func TestUnknownEnvironmentVariables(t *testing.T) {
	names := New().names()
	got := unknownEnv([]string{"WALRELAY_SLOT=a", "WALRELAY_KAFKA_BROKER=k:9092", "WALRELAY_CONFIG=f.yaml", "PATH=/bin",
		"WALRELAY_TEST_DATABASE_URL=x", "WALRELAY_PG_VERSION=17", "WALRELAY_COMPLETELY_DIFFERENT=1", "WALRELAY_ADMIN_URL=http://r:9731"}, names)
	want := []string{
		"environment variable WALRELAY_KAFKA_BROKER is not a walrelay setting and is ignored; did you mean WALRELAY_KAFKA_BROKERS?",
		"environment variable WALRELAY_COMPLETELY_DIFFERENT is not a walrelay setting and is ignored",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("warnings:\n%q\nwant:\n%q", got, want)
	}
}

func TestBytesSetting(t *testing.T) {
	for in, want := range map[string]int64{"1048576": 1 << 20, "64MiB": 64 << 20, "512KiB": 512 << 10, "1MB": 1_000_000,
		"2GiB": 2 << 30, "10 kB": 10_000, "0": 0, "7B": 7} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "lots", "-1", "1.5MiB", "64mib", "9999999999GiB"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) succeeded; want an error", in)
		}
	}
	for n, want := range map[int64]string{64 << 20: "64MiB", 0: "0", 1000: "1000", 3 << 10: "3KiB", 1<<30 + 1: "1073741825"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// Envelope columns with JSON value schemas need topic-prefix, which names the
// struct's schema; the byte array converter cannot write a struct at all.
func TestCheckEnvelope(t *testing.T) {
	tables := []relay.TableConfig{{Table: "public.outbox", Columns: outbox.Columns{Envelope: []outbox.HeaderColumn{{Column: "a"}}}}}
	for _, tc := range []struct {
		name   string
		format record.Format
		want   string
	}{
		{"json schemas with prefix", record.Format{ValueConverter: record.JSON, ValueSchemas: true, TopicPrefix: "dbserver1"}, ""},
		{"json schemas without prefix", record.Format{ValueConverter: record.JSON, ValueSchemas: true}, "set topic-prefix"},
		{"bytearray", record.Format{ValueConverter: record.ByteArray}, "needs value-converter json or string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := sinks.DefaultConfig()
			sc.Format = tc.format
			err := checkEnvelope(sc, tables)
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("checkEnvelope: %v, want %q", err, tc.want)
			}
		})
	}
}
