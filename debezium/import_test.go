package debezium_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/walrelay/walrelay/debezium"
	"github.com/walrelay/walrelay/settings"
)

// postgresConnector is the connector class a refused file is told to name.
const postgresConnector = "io.debezium.connector.postgresql.PostgresConnector"

var update = flag.Bool("update", false, "rewrite the golden files")

// debeziumConfigs are the convertible configurations in testdata, each with
// a .golden file of the expected output.
var debeziumConfigs = []string{"connect-outbox.json", "server.properties", "unsupported.json", "router-placement.json", "tutorial-outbox.json", "strimzi-outbox.yaml"}

func convertTestdata(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := debezium.Import(name, data, nil, nil)
	if err != nil {
		t.Fatalf("import %s: %v", name, err)
	}
	return out
}

// TestImportDebeziumGolden compares each conversion with its golden file; -update
// rewrites them.
func TestImportDebeziumGolden(t *testing.T) {
	for _, name := range debeziumConfigs {
		t.Run(name, func(t *testing.T) {
			got := convertTestdata(t, name)
			golden := filepath.Join("testdata", strings.TrimSuffix(name, filepath.Ext(name))+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s (run with -update if intended):\n%s", golden, got)
			}
		})
	}
}

// TestImportDebeziumOutputLoads feeds each output to the loader `walrelay run
// --config` uses: an unknown key or a bad value fails.
func TestImportDebeziumOutputLoads(t *testing.T) {
	for _, name := range debeziumConfigs {
		t.Run(name, func(t *testing.T) {
			out := convertTestdata(t, name)
			path := filepath.Join(t.TempDir(), "walrelay.yaml")
			if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
				t.Fatal(err)
			}
			s := settings.New()
			fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
			s.Register(fs)
			if err := fs.Parse([]string{"--config", path}); err != nil {
				t.Fatal(err)
			}
			if err := s.Load(fs); err != nil {
				t.Fatalf("walrelay run --config would refuse the output: %v", err)
			}
			if !strings.Contains(out, "\nkafka-brokers: ") {
				if !strings.Contains(out, "# kafka-brokers: not in the connector configuration") {
					t.Errorf("no kafka-brokers and no reminder to set them:\n%s", out)
				}
				s.Sinks.Kafka.Brokers = []string{"broker:9092"} // what the reminder asks for
			}
			if err := errors.Join(s.Relay.Validate(), s.Sinks.Validate()); err != nil {
				t.Errorf("walrelay run would refuse the output: %v", err)
			}
			if s.Relay.DatabaseURL == "" || s.Relay.Columns.AggregateID == "" && len(s.Relay.Tables) == 0 {
				t.Errorf("database url %q, aggregate id column %q, %d tables: the mapping got lost",
					s.Relay.DatabaseURL, s.Relay.Columns.AggregateID, len(s.Relay.Tables))
			}
		})
	}
}

// TestImportDebeziumMapping checks the mapped values and that no secret is printed.
func TestImportDebeziumMapping(t *testing.T) {
	connect := convertTestdata(t, "connect-outbox.json")
	for _, want := range []string{
		"database-url: postgres://cdc_reader@pg-primary.internal:5433/shop?sslmode=require\n",
		"slot: shop_outbox_slot\n", "publication: shop_outbox_pub\n", "kafka-brokers: kafka-a:9092,kafka-b:9092\n",
		"table: orders.outbox\n", "column-id: event_id\n", "column-aggregate-id: order_id\n",
		"column-aggregate-type: entity\n", "column-event-type: kind\n", "column-payload: body\n",
		"column-created-at: written_at\n", "topic-template: shop.{aggregate_type}.events\n",
	} {
		if !strings.Contains(connect, want) {
			t.Errorf("connect-outbox.json: output lacks %q:\n%s", want, connect)
		}
	}
	server := convertTestdata(t, "server.properties")
	for _, want := range []string{"sink: kafka\n", "kafka-brokers: broker1:9092\n", "tables:\n",
		"  - table: tenant_a.outbox\n", "  - table: tenant_b.outbox\n", "    column-aggregate-id: aggregateid\n",
		"    topic-template: outbox.event.{aggregate_type}\n", "# database.password=***"} {
		if !strings.Contains(server, want) {
			t.Errorf("server.properties: output lacks %q:\n%s", want, server)
		}
	}
	unsupported := convertTestdata(t, "unsupported.json")
	for _, want := range []string{
		"topic-template: outbox.event.{aggregate_type}\n", "column-headers: type:eventType\n",
		"expand-json-payload: \"true\"\n",
		"column-trace: tracingspancontext\n", "# snapshot.mode=never: no walrelay equivalent",
		"# plugin.name=decoderbufs: no walrelay equivalent", "# producer.override.sasl.jaas.config=***: no walrelay equivalent",
	} {
		if !strings.Contains(unsupported, want) {
			t.Errorf("unsupported.json: output lacks %q:\n%s", want, unsupported)
		}
	}
	for name, out := range map[string]string{"server.properties": server, "unsupported.json": unsupported} {
		for _, secret := range []string{"hunter2", "s3cr3t-value", "PlainLoginModule"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s: output prints the secret %q", name, secret)
			}
		}
	}
}

// TestImportDebeziumRefusesOthers checks that a file that is not a Debezium
// PostgreSQL configuration is an error that names what is wanted.
func TestImportDebeziumRefusesOthers(t *testing.T) {
	for name, data := range map[string]string{
		"not-debezium.json": "", // read from testdata
		"mysql.json":        `{"connector.class": "io.debezium.connector.mysql.MySqlConnector"}`,
		"empty.properties":  "# nothing\n",
		"broken.json":       `{"config": `,
	} {
		b := []byte(data)
		if data == "" {
			var err error
			if b, err = os.ReadFile(filepath.Join("testdata", name)); err != nil {
				t.Fatal(err)
			}
		}
		_, _, err := debezium.Import(name, b, nil, nil)
		if err == nil {
			t.Errorf("%s: converted, want an error", name)
			continue
		}
		if name != "broken.json" && !strings.Contains(err.Error(), postgresConnector) {
			t.Errorf("%s: error %q does not name %s", name, err, postgresConnector)
		}
	}
}

// TestImportDebeziumConverters maps Kafka Connect's converters, from the connector
// or else from the worker's properties, to walrelay's; JsonConverter's
// schemas.enable defaults to true (Kafka's JsonConverterConfig), a connector's
// setting wins over the worker's, and a converter walrelay does not have is a
// difference.
func TestImportDebeziumConverters(t *testing.T) {
	const base = `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "table.include.list": "public.outbox"`
	worker := debezium.ParseProperties("key.converter=org.apache.kafka.connect.json.JsonConverter\n" +
		"value.converter=org.apache.kafka.connect.json.JsonConverter\nvalue.converter.schemas.enable=false\n")
	for _, tc := range []struct {
		name      string
		connector string
		worker    map[string]string
		want      []string
		diffs     []string
	}{
		{"worker", base + "}", worker,
			[]string{"key-converter: json\nkey-converter-schemas-enable: \"true\"\nvalue-converter: json\n"}, nil},
		{"connector wins", base + `, "value.converter": "org.apache.kafka.connect.storage.StringConverter"}`, worker,
			[]string{"key-converter: json\n", "value-converter: string\n"}, nil},
		{"bytes", base + `, "value.converter": "io.debezium.converters.BinaryDataConverter", "value.converter.delegate.converter.type": "org.apache.kafka.connect.json.JsonConverter"}`, nil,
			[]string{"value-converter: bytearray\n"}, nil},
		{"avro", base + `, "value.converter": "io.confluent.connect.avro.AvroConverter"}`, nil,
			[]string{"value-converter: string\n"}, []string{"value.converter=io.confluent.connect.avro.AvroConverter"}},
		{"router", base + `, "transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
			"transforms.outbox.route.tombstone.on.empty.payload": "true", "transforms.outbox.table.field.event.timestamp": "ts",
			"transforms.outbox.route.topic.regex": "(.*)", "transforms.outbox.table.fields.additional.placement": "a:envelope:b"}`, nil,
			[]string{"tombstone-on-empty-payload: \"true\"\n", "record-timestamp: created-at\n", "column-created-at: ts\n", "column-envelope: a:b\n"},
			[]string{"transforms.outbox.route.topic.regex=(.*)"}},
		// With schemas the envelope's schema is named after topic.prefix
		// (EventRouterDelegate.getSchemaName), so the import carries it over.
		{"envelope with schemas", base + `, "topic.prefix": "dbserver1", "value.converter": "org.apache.kafka.connect.json.JsonConverter", "transforms": "outbox",
			"transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter", "transforms.outbox.table.fields.additional.placement": "a:envelope:b"}`, nil,
			[]string{"value-converter: json\n", "value-converter-schemas-enable: \"true\"\n", "topic-prefix: dbserver1\n", "column-envelope: a:b\n"}, nil},
		{"envelope with schemas before Debezium 2", base + `, "database.server.name": "inventory", "value.converter": "org.apache.kafka.connect.json.JsonConverter",
			"transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter", "transforms.outbox.table.fields.additional.placement": "a:envelope:b"}`, nil,
			[]string{"topic-prefix: inventory\n", "column-envelope: a:b\n"}, nil},
		{"envelope with schemas without topic.prefix", base + `, "value.converter": "org.apache.kafka.connect.json.JsonConverter", "transforms": "outbox",
			"transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter", "transforms.outbox.table.fields.additional.placement": "a:envelope:b"}`, nil,
			[]string{"value-converter: json\n"}, []string{"transforms.outbox.table.fields.additional.placement=a:envelope:b"}},
		{"envelope with bytes", base + `, "topic.prefix": "dbserver1", "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter", "transforms": "outbox",
			"transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter", "transforms.outbox.table.fields.additional.placement": "a:envelope:b"}`, nil,
			[]string{"value-converter: bytearray\n"}, []string{"transforms.outbox.table.fields.additional.placement=a:envelope:b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, diffs, err := debezium.Import(tc.name, []byte(tc.connector), tc.worker, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if len(diffs) != len(tc.diffs) {
				t.Fatalf("differences %q, want ones starting %q", diffs, tc.diffs)
			}
			for i, d := range tc.diffs {
				if !strings.HasPrefix(diffs[i], d) {
					t.Errorf("difference %q, want one starting %q", diffs[i], d)
				}
			}
		})
	}
}

// TestImportDebeziumRouting converts route.topic.regex and route.topic.replacement:
// the router's default regex (EventRouterConfigDefinition) stays a topic-template,
// any other is topic-regex and topic-replacement, and an expression Go's RE2 does
// not read as Java does (a lookaround, a backreference) is a difference naming it.
// route.by.field may name the type column too.
func TestImportDebeziumRouting(t *testing.T) {
	const base = `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "table.include.list": "public.outbox",
		"transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter"`
	for _, tc := range []struct {
		name, options string
		want          []string
		diffs         []string
	}{
		{"default", "", []string{"topic-template: outbox.event.{aggregate_type}\n"}, nil},
		{"replacement", `, "transforms.outbox.route.topic.replacement": "${routedByValue}.events"`,
			[]string{"topic-template: '{aggregate_type}.events'\n"}, nil},
		{"regex", `, "transforms.outbox.route.topic.regex": "(?<kind>order|customer)_.*", "transforms.outbox.route.topic.replacement": "${kind}s"`,
			[]string{"topic-regex: (?<kind>order|customer)_.*\n", "topic-replacement: ${kind}s\n"}, nil},
		{"group number", `, "transforms.outbox.route.topic.replacement": "events.$1"`,
			[]string{"topic-regex: (?<routedByValue>.*)\n", "topic-replacement: events.$1\n"}, nil},
		{"lookahead", `, "transforms.outbox.route.topic.regex": "(?!internal)(.*)", "transforms.outbox.route.topic.replacement": "$1"`,
			nil, []string{"transforms.outbox.route.topic.regex=(?!internal)(.*)"}},
		{"backreference", `, "transforms.outbox.route.topic.regex": "(a)\\1", "transforms.outbox.route.topic.replacement": "$1"`,
			nil, []string{`transforms.outbox.route.topic.regex=(a)\1`}},
		{"by type", `, "transforms.outbox.route.by.field": "type", "transforms.outbox.table.field.event.type": "type"`,
			[]string{"column-aggregate-type: type\n", "column-event-type: type\n"}, nil},
		// Header values follow time.precision.mode adaptive (the default) only.
		{"header times", `, "transforms.outbox.table.fields.additional.placement": "at:header", "time.precision.mode": "connect"`,
			[]string{"column-headers: at\n"}, []string{"time.precision.mode=connect"}},
		{"times without headers", `, "time.precision.mode": "connect"`, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, diffs, err := debezium.Import(tc.name, []byte(base+tc.options+"}"), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if len(diffs) != len(tc.diffs) {
				t.Fatalf("differences %q, want ones starting %q\n%s", diffs, tc.diffs, out)
			}
			for i, d := range tc.diffs {
				if !strings.HasPrefix(diffs[i], d) {
					t.Errorf("difference %q, want one starting %q", diffs[i], d)
				}
			}
		})
	}
}

// An expanded payload's field names go through field.name.adjustment.mode in
// Debezium; walrelay does not adjust them, so any mode but none is a difference.
func TestImportExpandFieldNameAdjustment(t *testing.T) {
	conf := `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "table.include.list": "public.outbox",
		"transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
		"transforms.outbox.table.expand.json.payload": "true", "field.name.adjustment.mode": "%s"}`
	for mode, want := range map[string]int{"none": 0, "avro": 1} {
		_, diffs, err := debezium.Import("c.json", []byte(strings.Replace(conf, "%s", mode, 1)), nil, nil)
		if err != nil || len(diffs) != want {
			t.Errorf("%s: %v, differences %q, want %d", mode, err, diffs, want)
		}
	}
}
