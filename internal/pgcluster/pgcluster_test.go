package pgcluster_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/pgcluster"
)

// requireBinaries skips when PostgreSQL is not installed, but fails under CI,
// where a skip would hide that the integration tests never ran.
func requireBinaries(t *testing.T) {
	t.Helper()
	if _, err := pgcluster.BinDir(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
}

func startCluster(t *testing.T, opts pgcluster.Options) *pgcluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	opts.Logf = t.Logf
	began := time.Now()
	c, err := pgcluster.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Logf("Start took %s", time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log tail:\n%s", c.LogTail(30))
		}
		if err := c.Close(); err != nil {
			t.Errorf("close cluster: %v", err)
		}
	})
	return c
}

func connect(t *testing.T, ctx context.Context, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func queryString(t *testing.T, ctx context.Context, conn *pgx.Conn, sql string) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(ctx, sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

func TestClusterLifecycle(t *testing.T) {
	requireBinaries(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := startCluster(t, pgcluster.Options{})

	if c.Port() <= 0 {
		t.Fatalf("Port() = %d", c.Port())
	}
	if fi, err := os.Stat(c.Dir()); err != nil || !fi.IsDir() {
		t.Fatalf("Dir() %q is not a directory: %v", c.Dir(), err)
	}

	admin := connect(t, ctx, c.URL("postgres"))
	if got := queryString(t, ctx, admin, "SHOW wal_level"); got != "logical" {
		t.Fatalf("wal_level = %q, want logical", got)
	}
	if got := queryString(t, ctx, admin, "SHOW fsync"); got != "off" {
		t.Fatalf("fsync = %q, want off", got)
	}
	num := queryString(t, ctx, admin, "SHOW server_version_num")
	if got := strconv.Itoa(c.ServerVersionNum()); got != num {
		t.Fatalf("ServerVersionNum() = %s, server_version_num = %s", got, num)
	}
	t.Logf("PostgreSQL %s (server_version_num %s) from %s", queryString(t, ctx, admin, "SHOW server_version"), num, c.BinDir())

	const db = "walrelay_test"
	for i := range 2 { // the second call must be a no-op
		if err := c.CreateDatabase(ctx, db); err != nil {
			t.Fatalf("CreateDatabase #%d: %v", i+1, err)
		}
	}

	conn, err := pgx.Connect(ctx, c.URL(db))
	if err != nil {
		t.Fatalf("connect to %s: %v", db, err)
	}
	if got := queryString(t, ctx, conn, "SELECT current_database()"); got != db {
		t.Fatalf("current_database() = %q, want %q", got, db)
	}
	var lsn string
	if err := conn.QueryRow(ctx, "SELECT lsn::text FROM pg_create_logical_replication_slot('t', 'pgoutput')").Scan(&lsn); err != nil {
		t.Fatalf("create logical replication slot: %v", err)
	}
	if lsn == "" {
		t.Fatal("pg_create_logical_replication_slot returned an empty lsn")
	}
	if _, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot('t')"); err != nil {
		t.Fatalf("drop replication slot: %v", err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE survivor (id int PRIMARY KEY, note text); INSERT INTO survivor VALUES (1, 'before stop'), (2, 'also')"); err != nil {
		t.Fatalf("create table: %v", err)
	}
	conn.Close(ctx)

	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if conn, err := pgx.Connect(ctx, c.URL(db)); err == nil {
		conn.Close(ctx)
		t.Fatal("connected to a stopped cluster")
	}
	if _, err := os.Stat(filepath.Join(c.Dir(), "data", "PG_VERSION")); err != nil {
		t.Fatalf("Stop removed the data directory: %v", err)
	}

	if err := c.StartAgain(ctx); err != nil {
		t.Fatalf("StartAgain: %v", err)
	}
	if err := c.StartAgain(ctx); err == nil {
		t.Fatal("StartAgain on a running cluster succeeded, want an error")
	}
	conn = connect(t, ctx, c.URL(db))
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM survivor").Scan(&n); err != nil {
		t.Fatalf("table created before Stop: %v", err)
	}
	if n != 2 {
		t.Fatalf("survivor has %d rows after restart, want 2", n)
	}
	if !strings.Contains(c.LogTail(50), "database system is ready to accept connections") {
		t.Fatalf("LogTail(50) lacks the ready line:\n%s", c.LogTail(50))
	}
	conn.Close(ctx)

	dir := c.Dir()
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Close left %s behind (stat: %v)", dir, err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := c.StartAgain(ctx); err == nil {
		t.Fatal("StartAgain after Close succeeded, want an error")
	}
}

func TestSettingsAndFixedPort(t *testing.T) {
	requireBinaries(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	first := startCluster(t, pgcluster.Options{})
	port := first.Port()
	if err := first.Close(); err != nil {
		t.Fatalf("close first cluster: %v", err)
	}

	c := startCluster(t, pgcluster.Options{
		Port:     port,
		Settings: map[string]string{"max_replication_slots": "7", "application_name": `it's a \ test`},
	})
	if c.Port() != port {
		t.Fatalf("Port() = %d, want %d", c.Port(), port)
	}
	if want := "postgres://postgres@127.0.0.1:" + strconv.Itoa(port) + "/x?sslmode=disable"; c.URL("x") != want {
		t.Fatalf("URL(x) = %q, want %q", c.URL("x"), want)
	}
	conn := connect(t, ctx, c.URL("postgres"))
	if got := queryString(t, ctx, conn, "SHOW max_replication_slots"); got != "7" {
		t.Fatalf("max_replication_slots = %q, want 7", got)
	}
	if got := queryString(t, ctx, conn, "SHOW wal_level"); got != "logical" {
		t.Fatalf("wal_level = %q, want logical", got)
	}
	if got, want := queryString(t, ctx, conn, "SELECT reset_val FROM pg_settings WHERE name = 'application_name'"), `it's a \ test`; got != want {
		t.Fatalf("application_name = %q, want %q (quoting in postgresql.conf)", got, want)
	}

	// The port is taken now, so a second cluster on it must fail cleanly.
	tmp := tempDirForServer(t)
	_, err := pgcluster.Start(ctx, pgcluster.Options{Port: port})
	if err == nil {
		t.Fatal("Start on a taken port succeeded, want an error")
	}
	t.Logf("expected error: %v", err)
	assertEmpty(t, tmp)
}

func TestStartFailureCleansUp(t *testing.T) {
	requireBinaries(t)
	tmp := tempDirForServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	_, err := pgcluster.Start(ctx, pgcluster.Options{Settings: map[string]string{"shared_buffers": "lots"}})
	if err == nil {
		t.Fatal("Start with shared_buffers=lots succeeded, want an error")
	}
	if !strings.Contains(err.Error(), "shared_buffers") {
		t.Fatalf("error lacks the server log lines naming the bad setting: %v", err)
	}
	t.Logf("expected error: %v", err)
	assertEmpty(t, tmp)
}

func TestStartCanceled(t *testing.T) {
	requireBinaries(t)
	tmp := tempDirForServer(t)
	// A deadline inside initdb or the server start is the case that matters; a
	// machine fast enough to finish first gets shorter ones, down to one already past,
	// so the test never passes without cancelling anything.
	for _, d := range []time.Duration{50 * time.Millisecond, 5 * time.Millisecond, 0} {
		ctx, cancel := context.WithTimeout(t.Context(), d)
		c, err := pgcluster.Start(ctx, pgcluster.Options{})
		cancel()
		if err == nil {
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Start error = %v, want context.DeadlineExceeded", err)
		}
		assertEmpty(t, tmp)
		return
	}
	t.Fatal("Start succeeded with a deadline already past")
}

func TestBinDirEnv(t *testing.T) {
	t.Setenv(pgcluster.BinDirEnv, t.TempDir())
	_, err := pgcluster.BinDir()
	if !errors.Is(err, pgcluster.ErrNoBinaries) {
		t.Fatalf("BinDir with an empty %s: err = %v, want ErrNoBinaries", pgcluster.BinDirEnv, err)
	}
	if !strings.Contains(err.Error(), "apt-get install -y postgresql") {
		t.Fatalf("error does not say how to install: %v", err)
	}
}

// fakeBinDir makes dir look like a PostgreSQL bin directory to the search.
func fakeBinDir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"initdb", "postgres"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// A version resolves to .pg/<major>/bin of the nearest parent, so a test finds the
// repository's binaries from its package directory.
func TestBinDirForFindsLocalInstall(t *testing.T) {
	t.Setenv(pgcluster.BinDirEnv, "")
	root := t.TempDir()
	want := filepath.Join(root, pgcluster.LocalDir, "99", "bin")
	fakeBinDir(t, want)
	pkg := filepath.Join(root, "internal", "pkg")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(pkg)

	if got, err := pgcluster.BinDirFor("99"); err != nil || got != want {
		t.Fatalf("BinDirFor(99) = %q, %v; want %q", got, err, want)
	}
	t.Setenv(pgcluster.VersionEnv, "99")
	if got, err := pgcluster.BinDir(); err != nil || got != want {
		t.Fatalf("BinDir with %s=99: %q, %v; want %q", pgcluster.VersionEnv, got, err, want)
	}

	_, err := pgcluster.BinDirFor("98")
	if !errors.Is(err, pgcluster.ErrNoBinaries) || !strings.Contains(err.Error(), "make setup-matrix") {
		t.Fatalf("BinDirFor(98): err = %v, want ErrNoBinaries saying how to install", err)
	}
	// Asked for by name, a missing version is a failure, never a reason to skip.
	t.Setenv(pgcluster.VersionEnv, "98")
	if _, err := pgcluster.BinDir(); err == nil || errors.Is(err, pgcluster.ErrNoBinaries) {
		t.Fatalf("BinDir with %s=98 missing: err = %v, want an error not wrapping ErrNoBinaries", pgcluster.VersionEnv, err)
	}
	if _, err := pgcluster.BinDirFor("17; rm"); err == nil {
		t.Fatal("BinDirFor accepted a version that is not a number")
	}
}

// BinDirAtLeast takes the version WALRELAY_PG_VERSION names when it is recent
// enough, and `make setup`'s 17 otherwise, so a matrix run of an older version
// still runs the tests that need a newer one.
func TestBinDirAtLeast(t *testing.T) {
	t.Setenv("WALRELAY_PG_MATRIX_DIR", "")
	root := t.TempDir()
	for _, major := range []string{"15", "17", "18"} {
		fakeBinDir(t, filepath.Join(root, pgcluster.LocalDir, major, "bin"))
	}
	t.Chdir(root)
	for _, tc := range []struct{ version, want string }{{"", "17"}, {"18", "18"}, {"15", "17"}, {"x", "17"}} {
		t.Setenv(pgcluster.VersionEnv, tc.version)
		want := filepath.Join(root, pgcluster.LocalDir, tc.want, "bin")
		if got, err := pgcluster.BinDirAtLeast(16); err != nil || got != want {
			t.Errorf("BinDirAtLeast(16) with %s=%q: %q, %v; want %q", pgcluster.VersionEnv, tc.version, got, err, want)
		}
	}
}

// A server of another major version than WALRELAY_PG_VERSION names fails Start, so
// a matrix run cannot silently test the default PostgreSQL.
func TestStartRefusesOtherMajorVersion(t *testing.T) {
	requireBinaries(t)
	binDir, err := pgcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(pgcluster.BinDirEnv, binDir)
	t.Setenv(pgcluster.VersionEnv, "9")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Options{Logf: t.Logf})
	if err == nil {
		c.Close()
		t.Fatal("Start succeeded with a server of another major version")
	}
	if !strings.Contains(err.Error(), pgcluster.VersionEnv+"=9, but the server started is PostgreSQL") {
		t.Fatalf("unexpected error: %v", err)
	}
	t.Logf("expected error: %v", err)

	// Options.BinDir is the caller's own choice and is not held to the variable.
	c = startCluster(t, pgcluster.Options{BinDir: binDir})
	if c.BinDir() != binDir || c.ServerVersionNum() < 140000 {
		t.Fatalf("BinDir() = %q, ServerVersionNum() = %d", c.BinDir(), c.ServerVersionNum())
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts pgcluster.Options
		ok   bool
	}{
		{"zero", pgcluster.Options{}, true},
		{"port", pgcluster.Options{Port: 54321}, true},
		{"settings", pgcluster.Options{Settings: map[string]string{"work_mem": "64MB", "auto_explain.log_min_duration": "0"}}, true},
		{"negative port", pgcluster.Options{Port: -1}, false},
		{"huge port", pgcluster.Options{Port: 70000}, false},
		{"port setting", pgcluster.Options{Settings: map[string]string{"port": "5432"}}, false},
		{"bad name", pgcluster.Options{Settings: map[string]string{"work mem": "1"}}, false},
		{"newline value", pgcluster.Options{Settings: map[string]string{"work_mem": "1\nfsync=on"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.opts.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// tempDirForServer points TMPDIR at a fresh directory the server user can
// traverse, so a test can check what Start leaves behind.
func tempDirForServer(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgcluster-test-") // t.TempDir's parent is 0700
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", dir)
	return dir
}

func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("failed Start left %d entries in %s, e.g. %s", len(entries), dir, entries[0].Name())
	}
}
