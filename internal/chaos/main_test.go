package chaos_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/pgcluster"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/migrations"
)

// The tests here treat walrelay as a black box: TestMain builds the binary once and
// each test runs it as a subprocess against a PostgreSQL cluster of its own (the tests
// restart it, which the harness's shared cluster must never be) and an in-process
// kfake broker.

// walrelayBin is the binary TestMain built.
var walrelayBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "walrelay-chaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	walrelayBin = filepath.Join(dir, "walrelay")
	if err := build(walrelayBin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := testenv.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// build runs `go build -o out ./cmd/walrelay` in the module root, two levels above
// this package's directory (the tests' working directory).
func build(out string) error {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return fmt.Errorf("find the module root: %w", err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return fmt.Errorf("module root %s has no go.mod (run the tests from internal/chaos): %w", root, err)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		if goroot := os.Getenv("GOROOT"); goroot != "" {
			goTool = filepath.Join(goroot, "bin", "go")
		} else {
			return fmt.Errorf("find the go command to build walrelay: %w", err)
		}
	}
	cmd := exec.Command(goTool, "build", "-o", out, "./cmd/walrelay")
	cmd.Dir = root
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build -o %s ./cmd/walrelay: %w\n%s", out, err, output)
	}
	return nil
}

// startCluster starts a throwaway PostgreSQL for this test alone, with
// synchronous_commit on (WAL reaches the walsender at once) and a short
// wal_sender_timeout, and migrates database "walrelay" in it. It returns the cluster
// and the database URL. The cluster's log tail is printed when the test fails.
func startCluster(t *testing.T, senderTimeout time.Duration) (*pgcluster.Cluster, string) {
	t.Helper()
	if _, err := pgcluster.BinDir(); err != nil {
		if errors.Is(err, pgcluster.ErrNoBinaries) && os.Getenv("CI") == "" {
			t.Skipf("skipping: %v", err)
		}
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, err := pgcluster.Start(ctx, pgcluster.Options{Settings: map[string]string{
		"synchronous_commit": "on",
		"wal_sender_timeout": strconv.Itoa(int(senderTimeout.Milliseconds())) + "ms",
		"max_wal_size":       "4GB", // the soak writes gigabytes; fewer forced checkpoints
		// Autovacuum's ANALYZE replaces the relay's bookkeeping plan made while the
		// outbox was tiny (see TestBookkeepingAfterTinyTable); with the default one
		// minute between rounds the first minute of load on a fresh table can stall.
		"autovacuum_naptime": "5s",
	}})
	if err != nil {
		t.Fatalf("start postgresql: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("postgres log (last lines):\n%s", pg.LogTail(40))
		}
		if err := pg.Close(); err != nil {
			t.Logf("close postgresql: %v", err)
		}
	})
	if err := pg.CreateDatabase(ctx, "walrelay"); err != nil {
		t.Fatal(err)
	}
	dbURL := pg.URL("walrelay")
	if _, err := migrations.Up(ctx, dbURL, nil); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return pg, dbURL
}

// proxiedKafka is a kfake cluster the relay reaches only through a TCP proxy, so the
// test can take the broker away. The broker advertises the proxy's address in its
// metadata (otherwise a client would bootstrap through the proxy and then connect to
// the broker directly); the test's own consumers dial the broker directly.
type proxiedKafka struct {
	cluster *kfake.Cluster
	proxy   *testenv.Proxy
	direct  string // the broker's own listener
}

// advertisingListener is kfake's listener, reporting another address as its own:
// kfake advertises its listener's address in metadata responses.
type advertisingListener struct {
	net.Listener
	advertised atomic.Pointer[net.TCPAddr]
}

func (l *advertisingListener) Addr() net.Addr {
	if a := l.advertised.Load(); a != nil {
		return a
	}
	return l.Listener.Addr()
}

func newProxiedKafka(t *testing.T) *proxiedKafka {
	t.Helper()
	var ln *advertisingListener
	cluster := testenv.Kafka(t, kfake.ListenFn(func(network, address string) (net.Listener, error) {
		inner, err := net.Listen(network, address)
		if err != nil {
			return nil, err
		}
		ln = &advertisingListener{Listener: inner}
		return ln, nil
	}))
	if ln == nil {
		t.Fatal("kfake did not listen through ListenFn")
	}
	direct := ln.Listener.Addr().String()
	proxy := testenv.NewProxy(t, direct)
	addr, err := net.ResolveTCPAddr("tcp", proxy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	ln.advertised.Store(addr)
	return &proxiedKafka{cluster: cluster, proxy: proxy, direct: direct}
}

// directOpts make a test client reach the broker without the proxy: it dials the
// broker's own listener whenever metadata names the proxy.
func (k *proxiedKafka) directOpts() []kgo.Opt {
	proxyAddr := k.proxy.Addr()
	return []kgo.Opt{kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		if host == proxyAddr {
			host = k.direct
		}
		var d net.Dialer
		return d.DialContext(ctx, network, host)
	})}
}

// relayEnv is the whole environment of a relay run: nothing of the test process's
// environment leaks in but PATH, HOME and TMPDIR.
func relayEnv(dbURL, brokers, slot string, extra ...string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	if v, ok := os.LookupEnv("TMPDIR"); ok {
		env = append(env, "TMPDIR="+v)
	}
	env = append(env,
		"WALRELAY_DATABASE_URL="+dbURL,
		"WALRELAY_KAFKA_BROKERS="+brokers,
		"WALRELAY_SLOT="+slot,
		"WALRELAY_STATUS_INTERVAL=100ms",
		"WALRELAY_METRICS_ADDR=",
		"WALRELAY_LOG_FORMAT=text",
	)
	return append(env, extra...)
}

// relayRuns runs the walrelay binary, one run at a time, each with its output in a
// log file of its own. When the test fails, the tail of every run's log is printed;
// a run still going at the end of the test is killed.
type relayRuns struct {
	t    *testing.T
	env  []string
	dir  string
	logs []string // one per run

	cmd   *exec.Cmd
	done  chan struct{}
	state *os.ProcessState // set before done is closed
}

// logDirEnv names a directory where the relay runs' logs are kept (one subdirectory
// per test); by default they go to the test's temporary directory.
const logDirEnv = "WALRELAY_CHAOS_LOGS"

func newRelayRuns(t *testing.T, env []string) *relayRuns {
	dir := t.TempDir()
	if keep := os.Getenv(logDirEnv); keep != "" {
		dir = filepath.Join(keep, t.Name()+"-"+time.Now().Format("20060102-150405"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Logf("relay logs in %s", dir)
	}
	r := &relayRuns{t: t, env: env, dir: dir}
	t.Cleanup(func() {
		if r.cmd != nil && !r.exited() {
			_ = r.cmd.Process.Kill()
			<-r.done
		}
		for i, path := range r.logs {
			text, _ := os.ReadFile(path)
			if strings.Contains(string(text), "panic:") || strings.Contains(string(text), "WARNING: DATA RACE") {
				t.Errorf("relay run %d crashed on its own (panic or data race in its log)", i+1)
			}
		}
		if t.Failed() {
			var problems []string
			for i, path := range r.logs {
				text, _ := os.ReadFile(path)
				for _, line := range strings.Split(string(text), "\n") {
					if strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") {
						problems = append(problems, fmt.Sprintf("run %d: %s", i+1, line))
					}
				}
			}
			if len(problems) > 0 {
				t.Logf("relay errors and warnings, all runs (%d, at most 40 shown):\n%s", len(problems),
					strings.Join(problems[:min(len(problems), 40)], "\n"))
			}
			for i, path := range r.logs {
				n := 15
				if i == len(r.logs)-1 {
					n = 60
				}
				t.Logf("relay run %d of %d, last %d lines of its log:\n%s", i+1, len(r.logs), n, tailFile(path, n))
			}
		}
	})
	return r
}

// start starts the next run; the previous one must have exited.
func (r *relayRuns) start() {
	r.t.Helper()
	if r.cmd != nil && !r.exited() {
		r.t.Fatal("relay: start while the previous run is still going")
	}
	path := filepath.Join(r.dir, fmt.Sprintf("relay-%02d.log", len(r.logs)+1))
	f, err := os.Create(path)
	if err != nil {
		r.t.Fatal(err)
	}
	cmd := exec.Command(walrelayBin, "run")
	cmd.Env = r.env
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		r.t.Fatalf("start walrelay: %v", err)
	}
	r.logs = append(r.logs, path)
	r.cmd, r.done, r.state = cmd, make(chan struct{}), nil
	done := r.done
	go func() {
		_ = cmd.Wait()
		f.Close()
		r.state = cmd.ProcessState
		close(done)
	}()
}

func (r *relayRuns) pid() int { return r.cmd.Process.Pid }

func (r *relayRuns) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// check fails the test when the current run exited without being told to.
func (r *relayRuns) check() {
	r.t.Helper()
	if r.exited() {
		r.t.Fatalf("relay run %d exited on its own (%s)", len(r.logs), r.state)
	}
}

// kill ends the current run with SIGKILL and waits for it.
func (r *relayRuns) kill() {
	r.t.Helper()
	r.check()
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		r.t.Fatalf("SIGKILL the relay: %v", err)
	}
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		r.t.Fatal("relay still running 10s after SIGKILL")
	}
}

// stop sends SIGTERM and waits for the exit code, which must be 0 (graceful stop).
func (r *relayRuns) stop(timeout time.Duration) time.Duration {
	r.t.Helper()
	r.check()
	began := time.Now()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		r.t.Fatalf("SIGTERM the relay: %v", err)
	}
	select {
	case <-r.done:
	case <-time.After(timeout):
		r.t.Fatalf("relay still running %s after SIGTERM", timeout)
	}
	if code := r.state.ExitCode(); code != 0 {
		r.t.Errorf("relay exited with code %d after SIGTERM, want 0 (graceful stop)", code)
	}
	return time.Since(began)
}

// logContains counts the lines of every run's log that contain substr.
func (r *relayRuns) logCount(substr string) int {
	n := 0
	for _, path := range r.logs {
		text, _ := os.ReadFile(path)
		n += strings.Count(string(text), substr)
	}
	return n
}

func tailFile(path string, n int) string {
	text, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(text), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// admin is the test's own connection to the database, reconnecting after failures
// (the tests restart PostgreSQL). It belongs to one goroutine.
type admin struct {
	url  string
	conn *pgx.Conn
}

// queryRow runs a one-row query; after an error the next call reconnects.
func (a *admin) queryRow(ctx context.Context, sql string, args []any, dest ...any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if a.conn == nil || a.conn.IsClosed() {
		conn, err := pgx.Connect(ctx, a.url)
		if err != nil {
			return err
		}
		a.conn = conn
	}
	err := a.conn.QueryRow(ctx, sql, args...).Scan(dest...)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		a.conn.Close(context.Background())
		a.conn = nil
	}
	return err
}

func (a *admin) close() {
	if a.conn != nil {
		a.conn.Close(context.Background())
		a.conn = nil
	}
}

// currentLSN is pg_current_wal_lsn().
func (a *admin) currentLSN(ctx context.Context) (pglogrepl.LSN, error) {
	var s string
	if err := a.queryRow(ctx, "SELECT pg_current_wal_lsn()::text", nil, &s); err != nil {
		return 0, err
	}
	return pglogrepl.ParseLSN(s)
}

// slotState returns the slot's confirmed_flush_lsn and whether a walsender streams it
// with its catch-up pass done (the relay is streaming).
func (a *admin) slotState(ctx context.Context, slot string) (confirmed pglogrepl.LSN, streaming bool, err error) {
	var lsn *string
	err = a.queryRow(ctx, `SELECT s.confirmed_flush_lsn::text, s.active AND w.catchup_done_at IS NOT NULL
		FROM pg_replication_slots s JOIN walrelay_slots w USING (slot_name) WHERE s.slot_name = $1`,
		[]any{slot}, &lsn, &streaming)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil || lsn == nil {
		return 0, false, err
	}
	confirmed, err = pglogrepl.ParseLSN(*lsn)
	return confirmed, streaming, err
}

var poll = testenv.Eventually

// waitStreaming waits until the relay streams the slot.
func waitStreaming(t *testing.T, db *admin, slot string, relay *relayRuns, timeout time.Duration) {
	t.Helper()
	var lastErr error
	if !poll(timeout, func() bool {
		if relay.exited() {
			return true
		}
		_, streaming, err := db.slotState(context.Background(), slot)
		lastErr = err
		return streaming
	}) {
		t.Fatalf("relay did not stream slot %s within %s (last error: %v)", slot, timeout, lastErr)
	}
	relay.check()
}

// procStatus reads fields such as VmRSS and VmHWM (in bytes) from /proc/<pid>/status.
func procStatus(pid int, fields ...string) (map[string]int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		for _, want := range fields {
			if name != want {
				continue
			}
			parts := strings.Fields(rest) // "123456 kB"
			if len(parts) == 2 && parts[1] == "kB" {
				if kb, err := strconv.ParseInt(parts[0], 10, 64); err == nil {
					out[name] = kb << 10
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, want := range fields {
		if _, ok := out[want]; !ok {
			return nil, fmt.Errorf("/proc/%d/status has no %s", pid, want)
		}
	}
	return out, nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
