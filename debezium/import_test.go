package debezium_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

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
	out, _, err := debezium.Import(name, data, debezium.Options{Worker: testdataWorker(t, name)})
	if err != nil {
		t.Fatalf("import %s: %v", name, err)
	}
	return out
}

// testdataWorker reads testdata/NAME.worker, the worker a configuration that
// names no converter runs on (ReadWorker), or is nil without one.
func testdataWorker(t *testing.T, name string) *debezium.Worker {
	t.Helper()
	path := filepath.Join("testdata", strings.TrimSuffix(name, filepath.Ext(name))+".worker")
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		t.Fatal(err)
	}
	w, err := debezium.ReadWorker(filepath.Base(path), data)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// stringConverters is --key-converter string --value-converter string: the
// worker of the tests whose records do not depend on it.
var stringConverters = func() debezium.Options {
	w, err := debezium.ConverterFlags("string", "string", nil, nil)
	if err != nil {
		panic(err)
	}
	return debezium.Options{Converters: w}
}()

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

// TestImportDebeziumOutputLoads feeds each output, the registry converters'
// included, to the loader `walrelay run --config` uses: an unknown key or a bad
// value fails.
func TestImportDebeziumOutputLoads(t *testing.T) {
	for _, name := range append(slices.Clone(debeziumConfigs), registryConfigs...) {
		t.Run(name, func(t *testing.T) {
			out := withTLSFiles(t, convertTestdata(t, name))
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
			// CheckedConfig is what `walrelay run --check` runs: every setting, the
			// registry converters' (subject strategies against the shapes, the
			// registry's URLs and credentials) included.
			if _, err := s.CheckedConfig(slog.New(slog.DiscardHandler)); err != nil {
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
		_, _, err := debezium.Import(name, b, stringConverters)
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
	worker, err := debezium.ReadWorker("connect-distributed.properties", []byte("key.converter=org.apache.kafka.connect.json.JsonConverter\n"+
		"value.converter=org.apache.kafka.connect.json.JsonConverter\nvalue.converter.schemas.enable=false\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		connector string
		worker    *debezium.Worker
		want      []string
		diffs     []string
	}{
		{"worker", base + "}", worker,
			[]string{"key-converter: json\nkey-converter-schemas-enable: \"true\"\nvalue-converter: json\n"}, nil},
		{"connector wins", base + `, "value.converter": "org.apache.kafka.connect.storage.StringConverter"}`, worker,
			[]string{"key-converter: json\n", "value-converter: string\n"}, nil},
		{"bytes", base + `, "value.converter": "io.debezium.converters.BinaryDataConverter"}`, nil,
			[]string{"value-converter: bytearray\n"}, nil},
		{"bytes or delegate", base + `, "value.converter": "io.debezium.converters.BinaryDataConverter", "value.converter.delegate.converter.type": "org.apache.kafka.connect.json.JsonConverter"}`, nil,
			[]string{"value-converter: string\n"}, []string{"value.converter=io.debezium.converters.BinaryDataConverter: it writes a bytea payload column as its bytes and any other with"}},
		// Confluent's registry converters are mapped (registry_test.go); one walrelay
		// does not have is a difference.
		{"avro", base + `, "value.converter": "io.confluent.connect.avro.AvroConverter", "value.converter.schema.registry.url": "http://sr:8081"}`, nil,
			[]string{"value-converter: avro\nschema-registry-url: http://sr:8081\n"}, nil},
		{"another converter", base + `, "value.converter": "com.example.XmlConverter"}`, nil,
			[]string{"value-converter: string\n"}, []string{"value.converter=com.example.XmlConverter"}},
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
			opts := stringConverters
			if tc.worker != nil {
				opts = debezium.Options{Worker: tc.worker}
			}
			out, diffs, err := debezium.Import(tc.name, []byte(tc.connector), opts)
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
			out, diffs, err := debezium.Import(tc.name, []byte(base+tc.options+"}"), stringConverters)
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
		_, diffs, err := debezium.Import("c.json", []byte(strings.Replace(conf, "%s", mode, 1)), stringConverters)
		if err != nil || len(diffs) != want {
			t.Errorf("%s: %v, differences %q, want %d", mode, err, diffs, want)
		}
	}
}

// TestImportConverterPlatforms reads the converters a connector leaves to its
// platform from the platform's own defaults, and refuses a bare connector with
// nothing saying which worker runs it, naming the ways to tell:
//   - Debezium Server: debezium.format.key and .value are json unless set
//     (debezium-server DebeziumServer.getFormat), written by JsonConverter
//     (debezium-embedded ConvertingEngineBuilder.createConverter) with its own
//     schemas.enable default, true; debezium.format.value.NAME and
//     debezium.format.NAME are the converter's options (populateEngineProperties);
//   - Strimzi: a KafkaConnect's spec.config gets key.converter and value.converter
//     JsonConverter where it sets none (KafkaConnectConfiguration.DEFAULTS);
//   - Debezium's connect image: KEY_CONVERTER and VALUE_CONVERTER default to
//     JsonConverter, CONNECT_NAME_PARTS is the property name.parts
//     (container-images connect-base docker-entrypoint.sh);
//   - Kafka: a worker's properties must name both (WorkerConfig, no default).
//
// Debezium Server's Kafka sink also sends records without a timestamp
// (KafkaChangeConsumer), so table.field.event.timestamp sets no record-timestamp
// there, and converts every header with its header format, JSON
// (ConvertingEngineBuilder.createHeaderConverter): a difference from walrelay's
// text headers, named.
func TestImportConverterPlatforms(t *testing.T) {
	const bare = `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "table.include.list": "public.outbox"}`
	const server = "debezium.sink.type=kafka\ndebezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n" +
		"debezium.source.table.include.list=public.outbox\n"
	const strimziConnector = "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaConnector\nmetadata:\n  name: outbox\nspec:\n" +
		"  class: io.debezium.connector.postgresql.PostgresConnector\n  config:\n    table.include.list: public.outbox\n"
	const strimziConnect = "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaConnect\nmetadata:\n  name: connect\nspec:\n" +
		"  bootstrapServers: kafka:9092\n  config:\n    group.id: connect\n"
	worker := func(name, text string) *debezium.Worker {
		w, err := debezium.ReadWorker(name, []byte(text))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return w
	}
	flags := func(key, value string, keySchemas, valueSchemas *bool) *debezium.Worker {
		w, err := debezium.ConverterFlags(key, value, keySchemas, valueSchemas)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	no := false
	for _, tc := range []struct {
		name, config string
		opts         debezium.Options
		want         []string // lines of the output, or of the error
		diffs        int
		refused      bool
	}{
		{"bare connector", bare, debezium.Options{}, []string{"names no key.converter and value.converter", "--worker FILE",
			"a Strimzi KafkaConnect", "KEY_CONVERTER, VALUE_CONVERTER and CONNECT_*", "--key-converter and --value-converter (string, json, bytearray, avro, protobuf or json-schema)",
			"--value-converter-schemas-enable"}, 0, true},
		{"bare connector naming its converters", strings.TrimSuffix(bare, "}") +
			`, "key.converter": "org.apache.kafka.connect.storage.StringConverter", "value.converter": "org.apache.kafka.connect.json.JsonConverter"}`,
			debezium.Options{}, []string{"key-converter: string\n", "value-converter: json\nvalue-converter-schemas-enable: \"true\"\n"}, 0, false},
		{"bare connector, value converter only", strings.TrimSuffix(bare, "}") + `, "value.converter": "org.apache.kafka.connect.json.JsonConverter"}`,
			debezium.Options{}, []string{"names no key.converter, so"}, 0, true},
		{"server defaults", server, debezium.Options{}, []string{"key-converter: json\nkey-converter-schemas-enable: \"true\"\n" +
			"value-converter: json\nvalue-converter-schemas-enable: \"true\"\n",
			"# debezium.format.header=json (the default): differs from Debezium"}, 1, false},
		{"server value without schemas", server + "debezium.format.value.schemas.enable=false\n", debezium.Options{},
			[]string{"key-converter: json\nkey-converter-schemas-enable: \"true\"\nvalue-converter: json\ntable: "}, 1, false},
		{"server without schemas", server + "debezium.format.schemas.enable=false\n", debezium.Options{},
			[]string{"key-converter: json\nvalue-converter: json\n"}, 1, false},
		{"server avro", server + "debezium.format.value=avro\ndebezium.format.value.schema.registry.url=http://sr:8081\n", debezium.Options{},
			[]string{"# value.converter=io.confluent.connect.avro.AvroConverter: from Debezium Server's debezium.format.key and .value",
				"value-converter: avro\nschema-registry-url: http://sr:8081\n"}, 1, false},
		{"server cloudevents", server + "debezium.format.value=cloudevents\n", debezium.Options{},
			[]string{"# value.converter (Debezium Server's debezium.format.key and .value)=io.debezium.converters.CloudEventsConverter: differs"}, 2, false},
		{"server timestamps", server + "debezium.transforms=outbox\ndebezium.transforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n" +
			"debezium.transforms.outbox.table.field.event.timestamp=ts\n", debezium.Options{},
			[]string{"# table.field.event.timestamp: Debezium Server's Kafka sink leaves the record timestamp to the producer", "column-created-at: ts\n"}, 1, false},
		{"server flags", server, debezium.Options{Converters: flags("string", "", nil, nil)},
			[]string{"key-converter: string\nvalue-converter: json\n"}, 1, false},
		{"strimzi defaults", strimziConnect + "---\n" + strimziConnector, debezium.Options{},
			[]string{"# key.converter=org.apache.kafka.connect.json.JsonConverter: from Strimzi's default",
				"key-converter: json\nkey-converter-schemas-enable: \"true\"\nvalue-converter: json\nvalue-converter-schemas-enable: \"true\"\n"}, 0, false},
		{"strimzi connector alone", strimziConnector, debezium.Options{}, []string{"--worker FILE"}, 0, true},
		{"strimzi connect as --worker", strimziConnector, debezium.Options{Worker: worker("connect.yaml", strimziConnect)},
			[]string{"key-converter: json\nkey-converter-schemas-enable: \"true\"\n"}, 0, false},
		{"image defaults", bare, debezium.Options{Worker: worker("connect.env",
			"# debezium/connect\nBOOTSTRAP_SERVERS=kafka:9092\nVALUE_CONVERTER=org.apache.kafka.connect.storage.StringConverter\n"+
				"export CONNECT_KEY_CONVERTER_SCHEMAS_ENABLE=\"false\"\n")},
			[]string{"# key.converter=org.apache.kafka.connect.json.JsonConverter: from the default of Debezium's connect image",
				"key-converter: json\nvalue-converter: string\n"}, 0, false},
		{"worker properties", bare, debezium.Options{Worker: worker("connect-distributed.properties",
			"key.converter=org.apache.kafka.connect.converters.ByteArrayConverter\nvalue.converter=org.apache.kafka.connect.json.JsonConverter\n")},
			[]string{"key-converter: bytearray\nvalue-converter: json\nvalue-converter-schemas-enable: \"true\"\n"}, 0, false},
		{"flags over the worker", bare, debezium.Options{Worker: worker("connect.env", "KEY_CONVERTER=org.apache.kafka.connect.storage.StringConverter\n"),
			Converters: flags("", "json", nil, &no)}, []string{"key-converter: string\nvalue-converter: json\ntable: "}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, diffs, err := debezium.Import(tc.name, []byte(tc.config), tc.opts)
			if tc.refused {
				if err == nil {
					t.Fatalf("converted, want refused:\n%s", out)
				}
				out = err.Error()
			} else if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("lacks %q:\n%s", w, out)
				}
			}
			if len(diffs) != tc.diffs {
				t.Errorf("differences %q, want %d", diffs, tc.diffs)
			}
			if strings.HasPrefix(tc.name, "server") && strings.Contains(out, "record-timestamp: created-at") {
				t.Errorf("Debezium Server's records get the producer's timestamp, not created-at:\n%s", out)
			}
		})
	}
}

// A worker's properties that leave a converter out are not a worker Kafka
// Connect runs: refused, naming it.
func TestReadWorkerRefuses(t *testing.T) {
	_, err := debezium.ReadWorker("connect.properties", []byte("bootstrap.servers=kafka:9092\nkey.converter=org.apache.kafka.connect.json.JsonConverter\n"))
	if err == nil || !strings.Contains(err.Error(), "without value.converter, which Kafka Connect requires") {
		t.Errorf("error %v, want one naming value.converter", err)
	}
	if _, err := debezium.ConverterFlags("xml", "", nil, nil); err == nil ||
		!strings.Contains(err.Error(), "want string, json, bytearray, avro, protobuf or json-schema") {
		t.Errorf("--key-converter xml: %v", err)
	}
}

// TestImportByteBufferConverter maps Debezium's ByteBufferConverter and
// BinaryDataConverter by one rule (debezium-core io/debezium/converters: a value
// of Connect's BYTES schema is written as its bytes, any other by
// delegate.converter.type, configured by the options under that prefix, and
// without one the task fails): the catalog's type of the payload column (the
// aggregate id's for the key) says which applies.
func TestImportByteBufferConverter(t *testing.T) {
	const conf = `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "table.include.list": "public.outbox",
		"key.converter": "org.apache.kafka.connect.storage.StringConverter", "value.converter": "%s"%s}`
	catalog := func(payload string) *debezium.Catalog {
		return &debezium.Catalog{Tables: []string{"public.outbox"}, Types: map[string]map[string]string{
			"public.outbox": {"id": "uuid", "aggregatetype": "varchar", "aggregateid": "varchar", "payload": payload}}}
	}
	const jsonDelegate = `, "value.converter.delegate.converter.type": "org.apache.kafka.connect.json.JsonConverter"`
	for _, class := range []string{"io.debezium.converters.ByteBufferConverter", "io.debezium.converters.BinaryDataConverter"} {
		for _, tc := range []struct {
			name, options string
			catalog       *debezium.Catalog
			want          string
			diff          string // the difference's start; "" none
		}{
			{"bytea", "", catalog("bytea"), "value-converter: bytearray\n", ""},
			{"bytea with a delegate", jsonDelegate, catalog("bytea"), "value-converter: bytearray\n", ""},
			{"jsonb to the json delegate", jsonDelegate, catalog("jsonb"),
				"value-converter: json\nvalue-converter-schemas-enable: \"true\"\n", ""},
			{"jsonb to the json delegate without schemas", jsonDelegate + `, "value.converter.delegate.converter.type.schemas.enable": "false"`,
				catalog("jsonb"), "value-converter: json\ntable: ", ""},
			{"text to the string delegate", `, "value.converter.delegate.converter.type": "org.apache.kafka.connect.storage.StringConverter"`,
				catalog("text"), "value-converter: string\n", ""},
			{"jsonb without a delegate", "", catalog("jsonb"), "", "value.converter=" + class + ": the value column payload (jsonb) is not bytes"},
			{"jsonb to an avro delegate", `, "value.converter.delegate.converter.type": "io.confluent.connect.avro.AvroConverter"`, catalog("jsonb"), "",
				"value.converter.delegate.converter.type=io.confluent.connect.avro.AvroConverter: it writes the value column payload (jsonb)"},
			{"no catalog, no delegate", "", nil, "value-converter: bytearray\n", ""},
			{"no catalog, a delegate", jsonDelegate, nil, "", "value.converter=" + class + ": it writes a bytea payload column as its bytes"},
		} {
			t.Run(class[strings.LastIndex(class, ".")+1:]+" "+tc.name, func(t *testing.T) {
				config := fmt.Sprintf(conf, class, tc.options)
				out, diffs, err := debezium.Import("c.json", []byte(config), debezium.Options{Catalog: tc.catalog})
				if err != nil {
					t.Fatal(err)
				}
				if tc.want != "" && !strings.Contains(out, tc.want) {
					t.Errorf("output lacks %q:\n%s", tc.want, out)
				}
				if (tc.diff == "") != (len(diffs) == 0) || (tc.diff != "" && (len(diffs) != 1 || !strings.HasPrefix(diffs[0], tc.diff))) {
					t.Errorf("differences %q, want one starting %q", diffs, tc.diff)
				}
			})
		}
	}
}

// tlsFileLine is a schema-registry-tls-*-file line of an output.
var tlsFileLine = regexp.MustCompile(`(?m)^(schema-registry-tls-(?:ca|cert|key)-file): .*$`)

// withTLSFiles points the output's schema-registry-tls-* files, which name the
// connector's paths, at files of this test's that hold what they would: a CA
// certificate, and a client certificate with its key in one PEM file (as
// Confluent's PEM keystore holds both), so that the registry client is built
// from them as `walrelay run` would build it.
func withTLSFiles(t *testing.T, out string) string {
	t.Helper()
	if !tlsFileLine.MatchString(out) {
		return out
	}
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "walrelay test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	files := map[string][]byte{"ca.pem": cert, "client.pem": append(cert, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})...)}
	for f, data := range files {
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return tlsFileLine.ReplaceAllStringFunc(out, func(line string) string {
		setting, _, _ := strings.Cut(line, ":")
		f := "client.pem"
		if strings.HasSuffix(setting, "-ca-file") {
			f = "ca.pem"
		}
		return setting + ": " + filepath.Join(dir, f)
	})
}
