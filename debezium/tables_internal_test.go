package debezium

import (
	"slices"
	"strings"
	"testing"
)

// TestIncludedTables resolves table.include.list entries as Debezium's
// Predicates.includes matches them (debezium-util .../function/Predicates.java: the
// whole schema.table, case-insensitively), or says why not.
func TestIncludedTables(t *testing.T) {
	catalog := &Catalog{Tables: []string{"public.outbox", "public.orders", "tenant_a.outbox", "tenant_b.outbox", "tenant_b.outbox_old"}}
	for _, tc := range []struct {
		entry   string
		catalog *Catalog
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
	conf := `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "table.include.list": "tenant_.*\\.outbox",
		"key.converter": "org.apache.kafka.connect.storage.StringConverter", "value.converter": "org.apache.kafka.connect.storage.StringConverter"}`
	out, diffs, err := Import("c.json", []byte(conf), Options{Catalog: catalog})
	if err != nil || len(diffs) > 0 || !strings.Contains(out, "  - table: tenant_a.outbox\n") || !strings.Contains(out, "  - table: tenant_b.outbox\n") {
		t.Errorf("with the catalog: %v, %q:\n%s", err, diffs, out)
	}
	_, diffs, _ = Import("c.json", []byte(conf), Options{})
	if len(diffs) != 1 || !strings.HasPrefix(diffs[0], `table.include.list=tenant_.*\.outbox:`) {
		t.Errorf("without the catalog: differences %q, want table.include.list", diffs)
	}
}
