package main_test

import (
	"strings"
	"testing"
	"time"
)

func TestHelp(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"Usage:", "\n  run ", "\n  migrate ", "flags, WALRELAY_* environment variables"}},
		{[]string{"run", "--help"}, []string{"walrelay run [flags]",
			"--config", "--database-url", "--kafka-brokers", "--slot", "--topic-template", "--table", "--publication",
			"--status-interval", "--shutdown-timeout", "--max-inflight-events", "--log-level",
			"WALRELAY_DATABASE_URL", "WALRELAY_KAFKA_BROKERS", "WALRELAY_CONFIG"}},
		{[]string{"migrate", "--help"}, []string{"walrelay migrate [flags]", "--database-url", "--config",
			"walrelay_schema_version", "WALRELAY_DATABASE_URL"}},
		{[]string{"help", "run"}, []string{"walrelay run [flags]", "--database-url", "--slot"}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			res := run(t, 10*time.Second, baseEnv(), tc.args...)
			if res.code != 0 {
				t.Fatalf("exit code %d, want 0\nstderr:\n%s", res.code, res.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.stdout, w) {
					t.Errorf("help does not mention %q:\n%s", w, res.stdout)
				}
			}
		})
	}
}

// TestBadUsageExits2 checks that usage and configuration errors exit 2 at once, name
// the problem, open no connection and never print the database password.
func TestBadUsageExits2(t *testing.T) {
	t.Parallel()
	const password = "s3cr3tpw"
	type tcase struct {
		name string
		args []string
		env  []string // on top of a database URL (with password) and brokers pointing at the tripwire
		// noDB drops WALRELAY_DATABASE_URL from the environment.
		noDB bool
		want []string
	}
	badURL := "postgres://u:" + password + "@127.0.0.1:1/x?sslmode=bogus"
	cases := []tcase{
		{name: "unknown subcommand", args: []string{"bogus"}, want: []string{`unknown command "bogus"`}},
		{name: "unknown flag", args: []string{"run", "--no-such-flag"}, want: []string{"unknown flag: --no-such-flag\nRun 'walrelay run --help' for usage.\n"}},
		{name: "misspelt flag", args: []string{"run", "--kafka-broker", "k:9092"},
			want: []string{"unknown flag: --kafka-broker (did you mean --kafka-brokers?)\nRun 'walrelay run --help' for usage.\n"}},
		{name: "misspelt subcommand", args: []string{"migarte"}, want: []string{`unknown command "migarte"`, `did you mean "migrate"?`}},
		{name: "unknown dlq subcommand", args: []string{"dlq", "show"}, want: []string{`unknown command "show" for "walrelay dlq"`,
			"Run 'walrelay dlq --help' for usage.\n"}},
		{name: "bad size", args: []string{"run", "--max-inflight-bytes", "lots"}, want: []string{"--max-inflight-bytes", `"lots"`, "64MiB"}},
		{name: "positional argument", args: []string{"run", "extra"}, want: []string{`"extra"`, "Run 'walrelay run --help' for usage.\n"}},
		{name: "run without database url", args: []string{"run"}, noDB: true,
			want: []string{"database url is required", "WALRELAY_DATABASE_URL"}},
		{name: "migrate without database url", args: []string{"migrate"}, noDB: true,
			want: []string{"database url is required"}},
		{name: "bad duration flag", args: []string{"run", "--status-interval=abc"},
			want: []string{"--status-interval", `"abc"`}},
		{name: "bad duration env", args: []string{"run"}, env: []string{"WALRELAY_SHUTDOWN_TIMEOUT=abc"},
			want: []string{"WALRELAY_SHUTDOWN_TIMEOUT", `"abc"`}},
		{name: "bad number", args: []string{"run", "--max-inflight-events", "many"},
			want: []string{"--max-inflight-events", `"many"`}},
		{name: "bad slot", args: []string{"run", "--slot", "Bad-Name"}, want: []string{`slot "Bad-Name"`}},
		{name: "bad topic template", args: []string{"run", "--topic-template", "x.{nope}"},
			want: []string{"{nope}", "{aggregate_type}"}},
		{name: "bad broker address", args: []string{"run", "--kafka-brokers", "nohostport"},
			want: []string{`"nohostport" is not host:port`}},
		{name: "bad log level", args: []string{"run", "--log-level", "loud"}, want: []string{"--log-level", `"loud"`}},
		{name: "keepalive below status interval", args: []string{"run", "--status-interval", "5s", "--keepalive-interval", "1s"},
			want: []string{"keepalive interval"}},
		{name: "config file with unknown key", args: []string{"run", "--config", "FILE:slot: fine\nno-such-key: 1\n"},
			want: []string{`line 2: unknown setting "no-such-key"`}},
		{name: "config file with misspelt key", args: []string{"status", "--config", "FILE:slot: fine\n\npublicaton: p\n"},
			want: []string{`line 3: unknown setting "publicaton" (did you mean publication?)`}},
		{name: "config file with a flow error on line 2", args: []string{"run", "--config", "FILE:slot: fine\ntables: [{table: a}\nmode: poll\n"},
			want: []string{"line 2:"}},
		{name: "migrate config file with unknown key", args: []string{"migrate", "--config", "FILE:no-such-key: 1\n"},
			want: []string{`unknown setting "no-such-key"`}},
		{name: "config file missing", args: []string{"run", "--config", "/nonexistent/walrelay.yaml"},
			want: []string{"read config file", "/nonexistent/walrelay.yaml"}},
		{name: "config file from env missing", args: []string{"run"}, env: []string{"WALRELAY_CONFIG=/nonexistent/walrelay.yaml"},
			want: []string{"read config file", "/nonexistent/walrelay.yaml"}},
		{name: "config file bad value", args: []string{"run", "--config", "FILE:slot: fine\nstatus-interval: soon\n"},
			want: []string{"line 2: status-interval", `"soon"`}},
		{name: "config file not yaml", args: []string{"run", "--config", "FILE:slot: [unclosed\n"},
			want: []string{"config file"}},
		{name: "run with unparsable database url", args: []string{"run", "--database-url", badURL},
			want: []string{"database url", "sslmode"}},
		{name: "migrate with unparsable database url", args: []string{"migrate", "--database-url", badURL},
			want: []string{"database url", "sslmode"}},
		{name: "migrate with a run flag", args: []string{"migrate", "--slot", "x"}, want: []string{"unknown flag: --slot"}},
		{name: "bad pool setting in database url", args: []string{"run", "--database-url",
			"postgres://u:s3cr3tpw@127.0.0.1:1/x?pool_max_conns=abc"}, noDB: true, want: []string{"database url", "pool_max_conns"}},
		{name: "bad sink", args: []string{"run", "--sink", "kinesis"}, want: []string{`sink "kinesis"`}},
		// The demo is cmd/walrelay-demo; the old invocations point there.
		{name: "demo moved", args: []string{"demo"}, want: []string{"make demo", "cmd/walrelay-demo"}},
		{name: "demo moved, with flags", args: []string{"demo", "--events", "20000", "--rate", "0"}, want: []string{"make demo"}},
		{name: "demo moved, help", args: []string{"demo", "--help"}, want: []string{"make demo"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tw := newTripwire(t)
			env := baseEnv("WALRELAY_KAFKA_BROKERS="+tw.addr, "WALRELAY_METRICS_ADDR=")
			if !tc.noDB {
				env = append(env, "WALRELAY_DATABASE_URL=postgres://u:"+password+"@"+tw.addr+"/x")
			}
			env = append(env, tc.env...)
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				if content, ok := strings.CutPrefix(a, "FILE:"); ok {
					a = writeFile(t, "walrelay.yaml", content)
				}
				args[i] = a
			}

			res := run(t, 20*time.Second, env, args...)
			if res.code != 2 {
				t.Fatalf("exit code %d, want 2\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
			}
			// Well under the relay's first reconnect backoff (0.5s), let alone the
			// broker's: nothing was tried and retried.
			if res.took > 2*time.Second {
				t.Errorf("took %s to exit 2; a configuration error must be reported at once", res.took)
			}
			if n := tw.conns.Load(); n != 0 {
				t.Errorf("%d connection(s) opened to the database/broker address; want none before the configuration is accepted", n)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.stderr, w) {
					t.Errorf("stderr does not mention %q:\n%s", w, res.stderr)
				}
			}
			if !strings.Contains(res.stderr, "Run 'walrelay") || !strings.Contains(res.stderr, " --help'") {
				t.Errorf("stderr does not point to --help:\n%s", res.stderr)
			}
			if strings.Contains(res.stderr, "Usage:") || strings.Count(res.stderr, "\n") > 4 {
				t.Errorf("a mistake prints a wall of text, not the mistake and where help is:\n%s", res.stderr)
			}
			if strings.Contains(res.stderr+res.stdout, password) {
				t.Errorf("output contains the database password:\n%s%s", res.stdout, res.stderr)
			}
		})
	}
}

// TestImportDebeziumExitCodes runs the command: a Debezium configuration prints YAML
// (exit 0), another file exits 2 with the reason. A connector that names no
// converter is refused (exit 2) until --worker or --key-converter and
// --value-converter say which the worker runs.
func TestImportDebeziumExitCodes(t *testing.T) {
	t.Parallel()
	const connect = "../../debezium/testdata/connect-outbox.json"
	res := run(t, 10*time.Second, baseEnv(), "import-debezium", connect)
	if res.code != 2 || res.stdout != "" || !strings.Contains(res.stderr, "connect-outbox.json names no key.converter and value.converter") ||
		!strings.Contains(res.stderr, "--worker FILE") || !strings.Contains(res.stderr, "--key-converter and --value-converter") {
		t.Errorf("connect-outbox.json alone: exit code %d, want 2 saying how to tell the converters; stdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	res = run(t, 10*time.Second, baseEnv(), "import-debezium", "--worker", "../../debezium/testdata/connect-outbox.worker", connect)
	if res.code != 0 || !strings.Contains(res.stdout, "slot: shop_outbox_slot\n") || !strings.Contains(res.stdout, "key-converter: string\nvalue-converter: json\nrecord-timestamp") {
		t.Errorf("connect-outbox.json --worker: exit code %d, stdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	res = run(t, 10*time.Second, baseEnv(), "import-debezium", "--key-converter", "json", "--value-converter", "json",
		"--value-converter-schemas-enable=false", connect)
	if res.code != 0 || !strings.Contains(res.stdout, "key-converter: json\nkey-converter-schemas-enable: \"true\"\nvalue-converter: json\nrecord-timestamp") {
		t.Errorf("connect-outbox.json --key-converter --value-converter: exit code %d, stdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	res = run(t, 10*time.Second, baseEnv(), "import-debezium", "--key-converter", "xml", connect)
	if res.code != 2 || !strings.Contains(res.stderr, `--key-converter "xml": want string, json, bytearray, avro, protobuf or json-schema`) {
		t.Errorf("--key-converter xml: exit code %d, want 2; stderr:\n%s", res.code, res.stderr)
	}
	// Confluent's registry converters by flag; their registry options are the
	// worker's, and without --worker the URL is left to set.
	res = run(t, 10*time.Second, baseEnv(), "import-debezium", "--key-converter", "string", "--value-converter", "avro", connect)
	if res.code != 0 || !strings.Contains(res.stdout, "key-converter: string\nvalue-converter: avro\n") ||
		!strings.Contains(res.stdout, "# value.converter.schema.registry.url: not set where io.confluent.connect.avro.AvroConverter is configured") {
		t.Errorf("--value-converter avro: exit code %d, stdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	// A registry secret is not printed, and a refused option is named.
	res = run(t, 10*time.Second, baseEnv(), "import-debezium", "--worker", "../../debezium/testdata/registry-protobuf.worker",
		"../../debezium/testdata/registry-protobuf.json")
	if res.code != 0 || strings.Contains(res.stdout, "tok-sr-secret") || !strings.Contains(res.stdout, "WALRELAY_SCHEMA_REGISTRY_TOKEN") {
		t.Errorf("registry-protobuf.json: exit code %d, stdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	res = run(t, 10*time.Second, baseEnv(), "import-debezium", "../../debezium/testdata/not-debezium.json")
	if res.code != 2 || !strings.Contains(res.stderr, "not a Debezium PostgreSQL connector configuration") {
		t.Errorf("not-debezium.json: exit code %d, want 2; stderr:\n%s", res.code, res.stderr)
	}
	// Options whose records walrelay would not reproduce: refused, each named,
	// unless --allow-differences, which writes them as comments.
	const unsupportedWorker = "../../debezium/testdata/unsupported.worker"
	res = run(t, 10*time.Second, baseEnv(), "import-debezium", "--worker", unsupportedWorker, "../../debezium/testdata/unsupported.json")
	if res.code != 2 || res.stdout != "" || !strings.Contains(res.stderr, "transforms.unwrapped.type=org.apache.kafka.connect.transforms.InsertField$Value") ||
		!strings.Contains(res.stderr, "--allow-differences") {
		t.Errorf("unsupported.json: exit code %d, want 2 naming the option; stdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	res = run(t, 10*time.Second, baseEnv(), "import-debezium", "--allow-differences", "--worker", unsupportedWorker, "../../debezium/testdata/unsupported.json")
	if res.code != 0 || !strings.Contains(res.stdout, "# transforms.unwrapped.type=org.apache.kafka.connect.transforms.InsertField$Value: differs from Debezium") {
		t.Errorf("unsupported.json --allow-differences: exit code %d, stdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
}
