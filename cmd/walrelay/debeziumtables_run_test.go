package main_test

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
)

// TestImportDebeziumDatabaseURL runs the command against a real database: the
// regular expression of table.include.list becomes the tables it matches there, and
// a database that cannot be reached is an error saying which setting to check.
func TestImportDebeziumDatabaseURL(t *testing.T) {
	t.Parallel()
	dbURL := testenv.Database(t)
	execSQL(t, dbURL, `CREATE SCHEMA tenant_a; CREATE SCHEMA tenant_b;
		CREATE TABLE tenant_a.outbox (id uuid PRIMARY KEY); CREATE TABLE tenant_b.outbox (id uuid PRIMARY KEY);
		CREATE TABLE tenant_b.outbox_archive (id uuid PRIMARY KEY)`)
	conf := writeFile(t, "connector.json", `{"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
		"table.include.list": "tenant_.*\\.outbox", "key.converter": "org.apache.kafka.connect.storage.StringConverter",
		"value.converter": "org.apache.kafka.connect.storage.StringConverter"}`)
	res := run(t, 30*time.Second, baseEnv(), "import-debezium", "--database-url", dbURL, conf)
	if res.code != 0 || !strings.Contains(res.stdout, "tables:\n  - table: tenant_a.outbox\n") ||
		!strings.Contains(res.stdout, "  - table: tenant_b.outbox\n") || strings.Contains(res.stdout, "outbox_archive") {
		t.Errorf("exit code %d, stdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	res = run(t, 30*time.Second, baseEnv(), "import-debezium", conf)
	if res.code != 2 || !strings.Contains(res.stderr, "give --database-url") {
		t.Errorf("without --database-url: exit code %d, want 2; stderr:\n%s", res.code, res.stderr)
	}
	res = run(t, 30*time.Second, baseEnv(), "import-debezium", "--database-url", "postgres://nobody@127.0.0.1:1/none?connect_timeout=5", conf)
	if res.code == 0 || !strings.Contains(res.stderr, "--database-url") {
		t.Errorf("unreachable database: exit code %d, stderr:\n%s", res.code, res.stderr)
	}
}
