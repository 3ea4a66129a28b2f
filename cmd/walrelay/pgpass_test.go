package main_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/pgcluster"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/migrations"
)

// Each database of a databases: list finds its password in the pgpass file
// PGPASSFILE names (what the Helm chart mounts from a Secret; deploy/README.md):
// two roles that the server lets in only with their passwords, different ones,
// URLs that carry none, and both databases stream and deliver.
func TestDatabasesPasswordsFromPgpass(t *testing.T) {
	t.Parallel()
	testenv.Database(t) // skips (or fails under CI) like every test when PostgreSQL is missing
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pg, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		t.Fatalf("start a cluster: %v", err)
	}
	t.Cleanup(func() { _ = pg.Close() })
	admin := testenv.Connect(t, pg.URL("postgres"))
	var hbaFile string
	if err := admin.QueryRow(ctx, "SHOW hba_file").Scan(&hbaFile); err != nil {
		t.Fatal(err)
	}
	kafka := testenv.Kafka(t)
	names := []string{"orders", "billing"}
	var file, pgpass, strict strings.Builder
	fmt.Fprintf(&file, "status-interval: 100ms\ndatabases:\n")
	for i, name := range names {
		role, password := "relay_"+name, fmt.Sprintf("pw-%s-%d", name, i)
		for _, sql := range []string{"CREATE DATABASE " + name,
			fmt.Sprintf("CREATE ROLE %s LOGIN SUPERUSER REPLICATION PASSWORD '%s'", role, password)} {
			if _, err := admin.Exec(ctx, sql); err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
		}
		if _, err := migrations.Up(ctx, pg.URL(name), nil); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&strict, "host all %s 127.0.0.1/32 scram-sha-256\nhost replication %s 127.0.0.1/32 scram-sha-256\n", role, role)
		fmt.Fprintf(&pgpass, "127.0.0.1:%d:%s:%s:%s\n", pg.Port(), name, role, password)
		fmt.Fprintf(&file, "  - name: %s\n    database-url: postgres://%s@127.0.0.1:%d/%s?sslmode=disable\n    slot: walrelay_%s\n    topic-template: %s.{aggregate_type}\n",
			name, role, pg.Port(), name, name, name)
	}
	// First match wins: the relays' roles must give a password, everyone else is trusted.
	hba, err := os.ReadFile(hbaFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hbaFile, append([]byte(strict.String()), hba...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}

	addr := testenv.FreeAddr(t)
	env := baseEnv("WALRELAY_KAFKA_BROKERS="+strings.Join(kafka.ListenAddrs(), ","), "WALRELAY_LOG_FORMAT=text",
		"WALRELAY_METRICS_ADDR="+addr, "WALRELAY_CONFIG="+writeFile(t, "walrelay.yaml", file.String()),
		"PGPASSFILE="+writeFile(t, "pgpass", pgpass.String()))
	startProc(t, "relay", env, "run")
	testenv.WaitFor(t, time.Minute, "both databases to stream", func() bool {
		code, _ := fetchHTTP(t, "http://"+addr+"/readyz?streaming")
		return code == http.StatusOK
	})
	consumer := testenv.NewConsumer(t, kafka.ListenAddrs(), `^(orders|billing)\..*`)
	var written int
	for _, name := range names {
		written += len(testenv.WriteTx(t, testenv.Connect(t, pg.URL(name)), []string{name + "-1"}, "created", 5, false))
	}
	if !consumer.WaitDistinct(time.Minute, written) {
		t.Fatalf("delivered %d of %d events", consumer.Distinct(), written)
	}
}
