package debezium_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/debezium"
)

// TestImportStrimzi reads testdata/strimzi-outbox.yaml: the connector from
// the KafkaConnector (spec.class, spec.config), the converters and brokers from the
// KafkaConnect beside it, and --worker over the KafkaConnect.
func TestImportStrimzi(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "strimzi-outbox.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out, diffs, err := debezium.Import("strimzi-outbox.yaml", data, debezium.Options{})
	if err != nil || len(diffs) > 0 {
		t.Fatalf("import: %v, differences %q", err, diffs)
	}
	for _, want := range []string{"key-converter: json\n", "value-converter: json\n", "kafka-brokers: kafka-kafka-bootstrap:9092\n",
		"database-url: postgres://debezium@orders-db.shop.svc:5432/orders\n", "table: public.outbox\n",
		"expand-json-payload: \"true\"\n", "expand-json-payload-nulls: optional_bytes\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "secrets:shop") {
		t.Errorf("output prints the password reference:\n%s", out)
	}
	worker, err := debezium.ReadWorker("connect.properties", []byte("key.converter=org.apache.kafka.connect.storage.StringConverter\n"+
		"value.converter=org.apache.kafka.connect.storage.StringConverter\n"))
	if err != nil {
		t.Fatal(err)
	}
	out, _, err = debezium.Import("strimzi-outbox.yaml", data, debezium.Options{Worker: worker})
	if err != nil || !strings.Contains(out, "value-converter: string\n") {
		t.Errorf("with a worker file: %v, want its converters (string):\n%s", err, out)
	}
}

func TestImportStrimziRefuses(t *testing.T) {
	connector := "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaConnector\nmetadata:\n  name: %s\nspec:\n" +
		"  class: io.debezium.connector.postgresql.PostgresConnector\n  config:\n    table.include.list: public.outbox\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"no connector", "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaConnect\nspec:\n  config: {}\n",
			"without a KafkaConnector resource"},
		{"two connectors", strings.Replace(connector, "%s", "a", 1) + "---\n" + strings.Replace(connector, "%s", "b", 1),
			"2 KafkaConnector resources (a, b)"},
		{"another connector", strings.Replace(strings.Replace(connector, "%s", "a", 1), "postgresql.PostgresConnector", "mysql.MySqlConnector", 1),
			"spec.class in a Strimzi KafkaConnector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := debezium.Import("k.yaml", []byte(tc.yaml), debezium.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}
