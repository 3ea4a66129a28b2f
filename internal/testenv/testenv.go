// Package testenv is the integration-test harness: one throwaway PostgreSQL cluster
// per test binary (or the server at WALRELAY_TEST_DATABASE_URL), a fresh database per
// test, kfake brokers, NATS, Redis and RabbitMQ servers of the tests' own (package
// brokers), and helpers that write and read back outbox events.
//
// Integration tests never skip silently: when PostgreSQL cannot be had they fail
// under CI (CI set) and skip with the reason printed elsewhere.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/pgcluster"
	"github.com/walrelay/walrelay/internal/testenv/brokers"
	"github.com/walrelay/walrelay/migrations"
)

// DatabaseURLEnv names an existing server (wal_level=logical, a superuser) to use
// instead of a throwaway cluster.
const DatabaseURLEnv = "WALRELAY_TEST_DATABASE_URL"

var (
	mu      sync.Mutex
	cluster *pgcluster.Cluster
	baseURL string
	dbSeq   atomic.Int64
)

// Main runs the package's tests and stops the throwaway cluster and the shared
// brokers afterwards. Use it from TestMain: os.Exit(testenv.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	brokers.StopShared()
	mu.Lock()
	defer mu.Unlock()
	if cluster != nil {
		_ = cluster.Close()
	}
	return code
}

// server returns the base URL of the test server, starting the cluster once. Without
// PostgreSQL it fails the test under CI and skips it, saying why, elsewhere.
func server(t testing.TB) string {
	t.Helper()
	base, err := ensureServer()
	if errors.Is(err, pgcluster.ErrNoBinaries) && os.Getenv("CI") == "" {
		t.Skipf("skipping integration test: %v (or set %s)", err, DatabaseURLEnv)
	}
	if err != nil {
		t.Fatalf("integration tests need PostgreSQL: %v", err)
	}
	return base
}

func ensureServer() (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if baseURL != "" {
		return baseURL, nil
	}
	if u := os.Getenv(DatabaseURLEnv); u != "" {
		baseURL = u
		return baseURL, nil
	}
	if _, err := pgcluster.BinDir(); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Options{Settings: map[string]string{
		"synchronous_commit":    "on", // WAL reaches the walsender at once, not every 200ms
		"max_wal_senders":       "40",
		"max_replication_slots": "40",
	}})
	if err != nil {
		return "", fmt.Errorf("start throwaway postgresql: %w", err)
	}
	cluster = c
	baseURL = c.URL("postgres")
	return baseURL, nil
}

// Cluster returns the throwaway cluster, or nil when an external server is used.
func Cluster(t testing.TB) *pgcluster.Cluster {
	server(t)
	mu.Lock()
	defer mu.Unlock()
	return cluster
}

// Database creates a fresh, empty database for the test and returns its URL. The
// test's replication slots are dropped when it ends.
func Database(t testing.TB) string {
	t.Helper()
	base := server(t)
	dbURL, name, err := createDatabase(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropSlots(base, name) })
	return dbURL
}

func createDatabase(base string) (dbURL, name string, err error) {
	name = fmt.Sprintf("walrelay_test_%d_%d", os.Getpid(), dbSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", "", fmt.Errorf("connect to test server: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", "", fmt.Errorf("create database: %w", err)
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", "", fmt.Errorf("parse test url: %w", err)
	}
	u.Path = "/" + name
	return u.String(), name, nil
}

// NewMigratedDatabase is MigratedDatabase for TestMain, where there is no test yet.
func NewMigratedDatabase() (string, error) {
	base, err := ensureServer()
	if err != nil {
		return "", err
	}
	dbURL, _, err := createDatabase(base)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := migrations.Up(ctx, dbURL, nil); err != nil {
		return "", fmt.Errorf("migrate: %w", err)
	}
	return dbURL, nil
}

func dropSlots(base, database string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active`, database)
	_, _ = conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active`, database)
}

// MigratedDatabase is Database with walrelay's migrations applied.
func MigratedDatabase(t testing.TB) string {
	t.Helper()
	dbURL := Database(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := migrations.Up(ctx, dbURL, nil); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return dbURL
}

// Connect opens a connection closed at the end of the test.
func Connect(t testing.TB, dbURL string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// WithParams adds query parameters (runtime settings such as wal_sender_timeout)
// to a URL.
func WithParams(dbURL string, params map[string]string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		panic(err)
	}
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}
