package debezium_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/debezium"
)

// registryConfigs are the testdata configurations whose converters write through
// a Schema Registry, each with a .golden file; TestImportDebeziumOutputLoads
// loads their output through settings too.
var registryConfigs = []string{
	"registry-avro.json",           // connector: AvroConverter, USER_INFO, record strategy, PEM TLS
	"registry-protobuf.json",       // worker: ProtobufConverter both sides, static token, topic-record key
	"registry-jsonschema.yaml",     // Strimzi KafkaConnect: JsonSchemaConverter, credentials in the URL
	"registry-server.properties",   // Debezium Server: protobuf key, avro value, debezium.format.* options
	"registry-apicurio.properties", // Debezium Server: Apicurio's AvroConverter in the Confluent format
}

// TestImportRegistryGolden compares each registry conversion with its golden
// file (-update rewrites them) and checks the settings each maps to, and that
// none of the registry's secrets is printed.
func TestImportRegistryGolden(t *testing.T) {
	// The lines each conversion must hold: converters from the connector, the
	// worker or the platform; the options Confluent's serde reads
	// (AbstractKafkaSchemaSerDeConfig: auto.register.schemas true, use.latest.version
	// and normalize.schemas false unless set; TopicNameStrategy where no strategy is set).
	want := map[string][]string{
		"registry-avro.json": {"key-converter: string\nvalue-converter: avro\n" +
			"schema-registry-url: https://sr-a.internal:8081,https://sr-b.internal:8081\n" +
			"schema-registry-tls-ca-file: /etc/kafka/secrets/sr-ca.pem\n" +
			"schema-registry-tls-cert-file: /etc/kafka/secrets/relay.pem\n" +
			"schema-registry-tls-key-file: /etc/kafka/secrets/relay.pem\n" +
			"value-subject-name-strategy: record\n" +
			"schema-registry-auto-register: \"false\"\nschema-registry-use-latest-version: \"true\"\nschema-registry-normalize: \"true\"\n",
			"# value.converter.basic.auth.user.info=***: not copied; put user:password in WALRELAY_SCHEMA_REGISTRY_BASIC_AUTH",
			"# value.converter.connect.meta.data=true: the converter's default",
			// The envelope struct is the record RecordNameStrategy names the subject after,
			// and its name takes topic.prefix (EventRouterDelegate.getSchemaName).
			"\ncolumn-envelope: type:eventType\n", "\ntopic-prefix: shop\n",
			"# value.converter.schemas.cache.config=5000: changes no record"},
		"registry-protobuf.json": {"key-converter: protobuf\nvalue-converter: protobuf\nschema-registry-url: https://sr.internal\n" +
			"key-subject-name-strategy: topic-record\nvalue-subject-name-strategy: topic\n" +
			"schema-registry-auto-register: \"true\"\nschema-registry-use-latest-version: \"false\"\nschema-registry-normalize: \"false\"\n",
			"# key.converter.bearer.auth.token (the worker's properties)=***: not copied; put the token in WALRELAY_SCHEMA_REGISTRY_TOKEN",
			// Kafka Connect configures the worker's converter with the worker's options only.
			"# key.converter.schema.registry.url=http://ignored.internal:8081: no walrelay equivalent (Kafka Connect does not read it"},
		"registry-jsonschema.yaml": {"key-converter: string\nvalue-converter: json-schema\nschema-registry-url: http://sr.internal:8081\n" +
			"value-subject-name-strategy: topic-record\n", "\ntopic-prefix: app\n",
			"the user and password in it are not copied; put user:password in WALRELAY_SCHEMA_REGISTRY_BASIC_AUTH"},
		"registry-server.properties": {"key-converter: protobuf\nvalue-converter: avro\nschema-registry-url: http://sr.internal:8081\n" +
			"key-subject-name-strategy: topic\n" +
			"schema-registry-auto-register: \"false\"\nschema-registry-use-latest-version: \"true\"\n",
			// RecordNameStrategy.getRecordName throws for a schema without a record name.
			"io.confluent.kafka.serializers.subject.RecordNameStrategy: differs from Debezium (Confluent's serializer names that subject " +
				"after the value's record and throws for a value without one"},
		// Apicurio's native API's Confluent-compatible neighbour; auto-register and
		// find-latest are false unless set (Apicurio's SerdeConfig).
		"registry-apicurio.properties": {"key-converter: json\nvalue-converter: avro\n" +
			"schema-registry-url: http://apicurio.internal:8080/apis/ccompat/v6\nvalue-subject-name-strategy: topic\n" +
			"schema-registry-auto-register: \"true\"\nschema-registry-use-latest-version: \"false\"\n",
			"apicurio.auth.password (Debezium Server's debezium.format.key and .value)=***: not copied"},
	}
	for _, name := range registryConfigs {
		t.Run(name, func(t *testing.T) {
			got := convertTestdata(t, name)
			golden := filepath.Join("testdata", strings.TrimSuffix(name, filepath.Ext(name))+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			} else if w, err := os.ReadFile(golden); err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			} else if got != string(w) {
				t.Errorf("output differs from %s (run with -update if intended):\n%s", golden, got)
			}
			for _, w := range want[name] {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q:\n%s", w, got)
				}
			}
			for _, secret := range []string{"sr-pass-1", "tok-sr-secret", "url-pass-2", "sr-pass-3", "apicurio-pass-4"} {
				if strings.Contains(got, secret) {
					t.Errorf("output prints the secret %q:\n%s", secret, got)
				}
			}
		})
	}
}

// TestImportRegistryDifferences checks that what walrelay cannot reproduce of a
// registry converter is a difference naming the option, and that what it can is
// none: other subject strategies, credential sources, key stores, options
// walrelay lacks, one registry setting with two values, and Apicurio's
// converters outside the Confluent format (Apicurio 2.x's defaults:
// apicurio.registry.headers.enabled true, 8-byte ids, use-id globalId).
func TestImportRegistryDifferences(t *testing.T) {
	const connector = `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "table.include.list": "public.outbox",
		"key.converter": "org.apache.kafka.connect.storage.StringConverter", "value.converter": "%s"%s}`
	const avro = "io.confluent.connect.avro.AvroConverter"
	const apicurio = "io.apicurio.registry.utils.converter.AvroConverter"
	const url = `, "value.converter.schema.registry.url": "http://sr:8081"`
	const confluentMode = `, "value.converter.apicurio.registry.url": "http://ap:8080/apis/registry/v3", "value.converter.apicurio.registry.headers.enabled": "false",
		"value.converter.apicurio.registry.use-id": "contentId"`
	for _, tc := range []struct {
		name, class, options string
		want                 string // a line of the output; "" none
		diff                 string // the difference's start; "" none
	}{
		{"topic strategy", avro, url + `, "value.converter.value.subject.name.strategy": "io.confluent.kafka.serializers.subject.TopicNameStrategy"`,
			"value-subject-name-strategy: topic\n", ""},
		{"associated strategy", avro, url + `, "value.converter.value.subject.name.strategy": "io.confluent.kafka.serializers.subject.AssociatedNameStrategy"`,
			"", "value.converter.value.subject.name.strategy=io.confluent.kafka.serializers.subject.AssociatedNameStrategy: walrelay names subjects by"},
		{"custom strategy", avro, url + `, "value.converter.value.subject.name.strategy": "com.example.TenantStrategy"`,
			"", "value.converter.value.subject.name.strategy=com.example.TenantStrategy"},
		{"key strategy on the value converter", avro, url + `, "value.converter.key.subject.name.strategy": "io.confluent.kafka.serializers.subject.RecordNameStrategy"`,
			"value-subject-name-strategy: topic\n", ""},
		{"SASL_INHERIT", avro, url + `, "value.converter.basic.auth.credentials.source": "SASL_INHERIT"`,
			"", "value.converter.basic.auth.credentials.source=SASL_INHERIT: walrelay sends basic auth from the URL or from user:password"},
		{"OAUTHBEARER", avro, url + `, "value.converter.bearer.auth.credentials.source": "OAUTHBEARER", "value.converter.bearer.auth.client.secret": "cs"`,
			"", "value.converter.bearer.auth.credentials.source=OAUTHBEARER: walrelay sends a static token"},
		{"token with a logical cluster", avro, url + `, "value.converter.bearer.auth.credentials.source": "STATIC_TOKEN", "value.converter.bearer.auth.token": "t",
			"value.converter.bearer.auth.logical.cluster": "lsrc-1"`, "", "value.converter.bearer.auth.logical.cluster=lsrc-1: walrelay sends the token alone"},
		{"basic and bearer", avro, url + `, "value.converter.basic.auth.credentials.source": "USER_INFO", "value.converter.bearer.auth.credentials.source": "STATIC_TOKEN"`,
			"", "value.converter.bearer.auth.credentials.source=STATIC_TOKEN: set beside basic.auth.credentials.source"},
		{"JKS trust store", avro, url + `, "value.converter.schema.registry.ssl.truststore.location": "/etc/ts.jks", "value.converter.schema.registry.ssl.truststore.password": "changeit"`,
			"", "value.converter.schema.registry.ssl.truststore.location=/etc/ts.jks: a trust store of type JKS (the default); walrelay reads PEM"},
		{"PKCS12 key store", avro, url + `, "value.converter.schema.registry.ssl.keystore.type": "PKCS12", "value.converter.schema.registry.ssl.keystore.location": "/etc/ks.p12"`,
			"", "value.converter.schema.registry.ssl.keystore.location=/etc/ks.p12: a key store of type PKCS12"},
		{"encrypted PEM key", avro, url + `, "value.converter.schema.registry.ssl.keystore.type": "PEM", "value.converter.schema.registry.ssl.keystore.location": "/etc/k.pem",
			"value.converter.schema.registry.ssl.key.password": "kp"`, "", "value.converter.schema.registry.ssl.key.password=***: an encrypted private key"},
		{"inline PEM", avro, url + `, "value.converter.schema.registry.ssl.truststore.type": "PEM", "value.converter.schema.registry.ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----"`,
			"", "value.converter.schema.registry.ssl.truststore.certificates=-----BEGIN CERTIFICATE-----: PEM given inline"},
		{"no host name verification", avro, url + `, "value.converter.schema.registry.ssl.endpoint.identification.algorithm": ""`,
			"", "value.converter.schema.registry.ssl.endpoint.identification.algorithm=: turns off host name verification"},
		{"mock registry", avro, `, "value.converter.schema.registry.url": "mock://tests"`,
			"", "value.converter.schema.registry.url=mock://tests: walrelay reaches a registry over http or https only"},
		{"no registry url", avro, "", "# value.converter.schema.registry.url: not set where io.confluent.connect.avro.AvroConverter is configured", ""},
		{"not a boolean", avro, url + `, "value.converter.auto.register.schemas": "yes"`,
			"", "value.converter.auto.register.schemas=yes: not true or false"},
		{"enhanced avro", avro, url + `, "value.converter.enhanced.avro.schema.support": "true"`,
			"", "value.converter.enhanced.avro.schema.support=true: walrelay writes as io.confluent.connect.avro.AvroConverter does with its default, false"},
		{"enhanced avro at its default", avro, url + `, "value.converter.enhanced.avro.schema.support": "FALSE"`,
			"# value.converter.enhanced.avro.schema.support=FALSE: the converter's default", ""},
		{"schema id in a header", avro, url + `, "value.converter.value.schema.id.serializer": "io.confluent.kafka.serializers.schema.id.HeaderSchemaIdSerializer"`,
			"", "value.converter.value.schema.id.serializer=io.confluent.kafka.serializers.schema.id.HeaderSchemaIdSerializer: walrelay writes as"},
		{"a fixed schema id", avro, url + `, "value.converter.use.schema.id": "42"`, "", "value.converter.use.schema.id=42"},
		{"proto int enums", "io.confluent.connect.protobuf.ProtobufConverter", url + `, "value.converter.int.for.enums": "true"`,
			"", "value.converter.int.for.enums=true: walrelay writes as io.confluent.connect.protobuf.ProtobufConverter does with its default, false"},
		{"json schema decimals", "io.confluent.connect.json.JsonSchemaConverter", url + `, "value.converter.decimal.format": "NUMERIC"`,
			"", "value.converter.decimal.format=NUMERIC"},
		{"an option walrelay lacks", avro, url + `, "value.converter.proxy.host": "proxy"`,
			"", "value.converter.proxy.host=proxy: an option of io.confluent.connect.avro.AvroConverter walrelay does not have"},
		{"credentials in the url are not printed", avro, `, "value.converter.schema.registry.url": "mock://u:hunter2@tests"`,
			"", "value.converter.schema.registry.url=mock://***@tests"},
		{"apicurio in the Confluent format (3.x)", apicurio, confluentMode + `, "value.converter.apicurio.registry.id-handler": "io.apicurio.registry.serde.Default4ByteIdHandler"`,
			"schema-registry-url: http://ap:8080/apis/ccompat/v7\n", ""},
		{"apicurio with its defaults", apicurio, `, "value.converter.apicurio.registry.url": "http://ap:8080/apis/registry/v2"`,
			"", "value.converter.apicurio.registry.headers.enabled=(not set): Apicurio writes the schema id in a header"},
		{"apicurio with 8-byte ids", apicurio, confluentMode + `, "value.converter.apicurio.registry.id-handler": "io.apicurio.registry.serde.DefaultIdHandler"`,
			"", "value.converter.apicurio.registry.id-handler=io.apicurio.registry.serde.DefaultIdHandler: not a 4-byte id handler"},
		{"apicurio with global ids", apicurio, `, "value.converter.apicurio.registry.url": "http://ap:8080/apis/registry/v2", "value.converter.apicurio.registry.headers.enabled": "false",
			"value.converter.apicurio.registry.as-confluent": "true", "value.converter.apicurio.registry.use-id": "globalId"`,
			"", "value.converter.apicurio.registry.use-id=globalId: Apicurio's Confluent-compatible API"},
		{"apicurio record strategy", apicurio, confluentMode + `, "value.converter.apicurio.registry.as-confluent": "true",
			"value.converter.apicurio.registry.artifact-resolver-strategy": "io.apicurio.registry.serde.strategy.RecordIdStrategy"`,
			"", "value.converter.apicurio.registry.artifact-resolver-strategy=io.apicurio.registry.serde.strategy.RecordIdStrategy"},
		{"apicurio ExtJsonConverter", "io.apicurio.registry.utils.converter.ExtJsonConverter", "",
			"", "value.converter=io.apicurio.registry.utils.converter.ExtJsonConverter: walrelay writes values as"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, diffs, err := debezium.Import("c.json", []byte(strings.Replace(strings.Replace(connector, "%s", tc.class, 1), "%s", tc.options, 1)), debezium.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != "" && !strings.Contains(out, tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, out)
			}
			if tc.diff == "" && len(diffs) != 0 {
				t.Errorf("differences %q, want none\n%s", diffs, out)
			}
			if tc.diff != "" && (len(diffs) == 0 || !strings.HasPrefix(diffs[0], tc.diff)) {
				t.Errorf("differences %q, want the first starting %q\n%s", diffs, tc.diff, out)
			}
			for _, secret := range []string{"hunter2", "changeit", `"kp"`, "cs\n"} {
				if strings.Contains(out, secret) {
					t.Errorf("output prints the secret %q:\n%s", secret, out)
				}
			}
		})
	}
}

// TestImportRegistryBothSides checks the settings walrelay has once for both
// converters: the same value on both sides is one setting; different ones are a
// difference naming the second side's option.
func TestImportRegistryBothSides(t *testing.T) {
	const conf = `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "table.include.list": "public.outbox",
		"key.converter": "io.confluent.connect.avro.AvroConverter", "key.converter.schema.registry.url": "http://sr:8081",
		"value.converter": "io.confluent.connect.avro.AvroConverter", "value.converter.schema.registry.url": "%s"%s}`
	for _, tc := range []struct {
		name, url, options, diff string
	}{
		{"one registry", "http://sr:8081", "", ""},
		{"two registries", "http://other:8081", "", "value.converter.schema.registry.url=http://other:8081: walrelay has one schema-registry-url for both converters"},
		{"auto-register on one side", "http://sr:8081", `, "value.converter.auto.register.schemas": "false"`,
			"value.converter.auto.register.schemas=false: walrelay has one schema-registry-auto-register for both converters; the value converter's is false, the other's true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, diffs, err := debezium.Import("c.json", []byte(strings.Replace(strings.Replace(conf, "%s", tc.url, 1), "%s", tc.options, 1)), debezium.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.diff == "" {
				if len(diffs) != 0 || strings.Count(out, "schema-registry-url: ") != 1 ||
					!strings.Contains(out, "key-subject-name-strategy: topic\nvalue-subject-name-strategy: topic\n") {
					t.Errorf("differences %q, want none and one schema-registry-url:\n%s", diffs, out)
				}
				return
			}
			if len(diffs) != 1 || !strings.HasPrefix(diffs[0], tc.diff) {
				t.Errorf("differences %q, want one starting %q", diffs, tc.diff)
			}
		})
	}
}

// TestImportRegistryPlatforms reads registry converters from the places a
// connector leaves them to: --key-converter/--value-converter (Confluent's
// classes; their options are the --worker's, if given), a worker's properties,
// and Debezium Server's formats (debezium.format.value=avro or protobuf, with
// Apicurio's converter where the format's options set apicurio.registry.url,
// ConvertingEngineBuilder.createConverter; jsonschema is no format of Debezium
// Server's, DebeziumSerializationProducer.getFormat).
func TestImportRegistryPlatforms(t *testing.T) {
	const bare = `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "table.include.list": "public.outbox"}`
	const server = "debezium.sink.type=kafka\ndebezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n" +
		"debezium.source.table.include.list=public.outbox\ndebezium.format.key.schemas.enable=false\n"
	flags := func(key, value string) *debezium.Worker {
		w, err := debezium.ConverterFlags(key, value, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	worker, err := debezium.ReadWorker("connect.properties", []byte("key.converter=org.apache.kafka.connect.storage.StringConverter\n"+
		"value.converter=org.apache.kafka.connect.json.JsonConverter\nvalue.converter.schema.registry.url=http://sr:8081\n"+
		"value.converter.value.subject.name.strategy=io.confluent.kafka.serializers.subject.RecordNameStrategy\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, config string
		opts         debezium.Options
		want         []string
		diffs        int
	}{
		{"flags alone", bare, debezium.Options{Converters: flags("string", "protobuf")},
			[]string{"value-converter: protobuf\n", "# value.converter.schema.registry.url: not set where io.confluent.connect.protobuf.ProtobufConverter is configured"}, 0},
		{"flags over a worker", bare, debezium.Options{Converters: flags("", "json-schema"), Worker: worker},
			// The worker's strategy is read, and refused: the value is the bare payload.
			[]string{"key-converter: string\nvalue-converter: json-schema\nschema-registry-url: http://sr:8081\n",
				"(the worker's properties)=io.confluent.kafka.serializers.subject.RecordNameStrategy: differs from Debezium"}, 1},
		{"server avro", server + "debezium.format.value=avro\ndebezium.format.value.schema.registry.url=http://sr:8081\n", debezium.Options{},
			[]string{"value-converter: avro\nschema-registry-url: http://sr:8081\n"}, 1},
		{"server protobuf", server + "debezium.format.value=protobuf\ndebezium.format.schema.registry.url=http://sr:8081\n", debezium.Options{},
			[]string{"value-converter: protobuf\nschema-registry-url: http://sr:8081\n"}, 1},
		{"server jsonschema", server + "debezium.format.value=jsonschema\n", debezium.Options{},
			[]string{"# value.converter (Debezium Server's debezium.format.key and .value)=debezium.format.value=jsonschema: differs"}, 2},
		{"server apicurio json", server + "debezium.format.value.apicurio.registry.url=http://ap:8080/apis/registry/v2\n", debezium.Options{},
			[]string{"=io.apicurio.registry.utils.converter.ExtJsonConverter: differs"}, 2},
		{"server apicurio avro by default", server + "debezium.format.value=avro\ndebezium.format.value.apicurio.registry.url=http://ap:8080/apis/registry/v2\n", debezium.Options{},
			[]string{"value.converter.apicurio.registry.headers.enabled=(not set): differs"}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, diffs, err := debezium.Import(tc.name, []byte(tc.config), tc.opts)
			if err != nil {
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
		})
	}
}
