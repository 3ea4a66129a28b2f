package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestImportStrimzi reads testdata/debezium/strimzi-outbox.yaml: the connector from
// the KafkaConnector (spec.class, spec.config), the converters and brokers from the
// KafkaConnect beside it, and --worker over the KafkaConnect.
func TestImportStrimzi(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "debezium", "strimzi-outbox.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out, diffs, err := importDebezium("strimzi-outbox.yaml", data, nil, nil)
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
	out, _, err = importDebezium("strimzi-outbox.yaml", data, map[string]string{}, nil)
	if err != nil || !strings.Contains(out, "value-converter: string\n") {
		t.Errorf("with a worker file: %v, want its converters (none: string):\n%s", err, out)
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
			_, _, err := importDebezium("k.yaml", []byte(tc.yaml), nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

// TestIncludedTables resolves table.include.list entries as Debezium's
// Predicates.includes matches them (debezium-util .../function/Predicates.java: the
// whole schema.table, case-insensitively), or says why not.
func TestIncludedTables(t *testing.T) {
	catalog := []string{"public.outbox", "public.orders", "tenant_a.outbox", "tenant_b.outbox", "tenant_b.outbox_old"}
	for _, tc := range []struct {
		entry   string
		catalog []string
		want    []string
		reason  string
	}{
		{`public.outbox`, nil, []string{"public.outbox"}, ""},
		{`public\.outbox`, nil, []string{"public.outbox"}, ""},
		{`tenant_.*\.outbox`, catalog, []string{"tenant_a.outbox", "tenant_b.outbox"}, ""},
		{`TENANT_B\..*`, catalog, []string{"tenant_b.outbox", "tenant_b.outbox_old"}, ""},
		{`tenant_.*\.outbox`, nil, nil, "give --database-url"},
		{`other\..*`, catalog, nil, "no table of --database-url matches"},
		{`(?!x).*\.outbox`, catalog, nil, "a negative lookahead"},
		{`tenant_[a.outbox`, catalog, nil, "not a regular expression Go can read"},
	} {
		got, reason := includedTables(tc.entry, tc.catalog)
		if !slices.Equal(got, tc.want) || (tc.reason == "") != (reason == "") || !strings.Contains(reason, tc.reason) {
			t.Errorf("%s: %q, %q; want %q, %q", tc.entry, got, reason, tc.want, tc.reason)
		}
	}
	// In a configuration: resolved into tables:, or refused naming the option.
	conf := `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "table.include.list": "tenant_.*\\.outbox"}`
	out, diffs, err := importDebezium("c.json", []byte(conf), nil, catalog)
	if err != nil || len(diffs) > 0 || !strings.Contains(out, "  - table: tenant_a.outbox\n") || !strings.Contains(out, "  - table: tenant_b.outbox\n") {
		t.Errorf("with the catalog: %v, %q:\n%s", err, diffs, out)
	}
	_, diffs, _ = importDebezium("c.json", []byte(conf), nil, nil)
	if len(diffs) != 1 || !strings.HasPrefix(diffs[0], `table.include.list=tenant_.*\.outbox:`) {
		t.Errorf("without the catalog: differences %q, want table.include.list", diffs)
	}
}
