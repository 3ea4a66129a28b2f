package main_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testenv"
)

// The tests treat walrelay as a black box: TestMain builds the binary once, and each
// test runs it as a subprocess with an explicit environment, against its own database
// on the harness's throwaway PostgreSQL and its own in-process kfake cluster.

// raceBuild is set by race_test.go when the tests run with -race: the binary is then
// built with the race detector too, so data races in the relay itself fail the tests.
var raceBuild bool

var built struct {
	once sync.Once
	dir  string
	path string // the walrelay executable
	err  error
}

// TestMain builds the binary once, before the tests run, and removes it afterwards.
// Fuzzing skips the build: the package's fuzz target runs in worker processes that
// start from TestMain too and need no binary.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.fuzz"); f == nil || f.Value.String() == "" {
		if _, err := walrelayBinary(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := testenv.Main(m)
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// walrelayBinary builds walrelay on first use and returns its path.
func walrelayBinary() (string, error) {
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "walrelay-cmd-test-"); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "walrelay")
		if built.err = build(built.path); built.err != nil {
			os.RemoveAll(built.dir)
			built.dir = ""
		}
	})
	return built.path, built.err
}

func binary(t *testing.T) string {
	t.Helper()
	path, err := walrelayBinary()
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func build(out string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		if root := os.Getenv("GOROOT"); root != "" {
			goTool = filepath.Join(root, "bin", "go")
		} else {
			return fmt.Errorf("find the go command to build walrelay: %w", err)
		}
	}
	args := []string{"build", "-o", out}
	if raceBuild {
		args = append(args, "-race")
	}
	args = append(args, "github.com/walrelay/walrelay/cmd/walrelay")
	cmd := exec.Command(goTool, args...)
	output, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, output)
	}
	return nil
}

// baseEnv is the environment every run starts from: nothing of the test process's
// WALRELAY_* settings leaks in.
func baseEnv(extra ...string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	if v, ok := os.LookupEnv("TMPDIR"); ok {
		env = append(env, "TMPDIR="+v)
	}
	return append(env, extra...)
}

// relayEnv configures `walrelay run` for a test database and kfake through the
// environment. The metrics listener is off: its default port is fixed, and tests run
// relays side by side.
func relayEnv(dbURL string, brokers []string, extra ...string) []string {
	env := baseEnv(
		"WALRELAY_DATABASE_URL="+dbURL,
		"WALRELAY_KAFKA_BROKERS="+strings.Join(brokers, ","),
		"WALRELAY_METRICS_ADDR=",
		"WALRELAY_LOG_FORMAT=text",
	)
	return append(env, extra...)
}

// result is the outcome of a walrelay run to completion.
type result struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// run runs walrelay to completion; a run that outlives timeout fails the test.
func run(t *testing.T, timeout time.Duration, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	err := cmd.Run()
	res := result{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(began)}
	if ctx.Err() != nil {
		t.Fatalf("walrelay %s still running after %s\nstdout:\n%s\nstderr:\n%s",
			strings.Join(args, " "), timeout, res.stdout, res.stderr)
	}
	res.code = exitCode(t, err)
	checkNoRace(t, "walrelay "+strings.Join(args, " "), res.stderr)
	return res
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		t.Fatalf("run walrelay: %v", err)
	}
	return exitErr.ExitCode() // -1 when a signal ended it
}

func checkNoRace(t *testing.T, what, stderr string) {
	t.Helper()
	if strings.Contains(stderr, "WARNING: DATA RACE") {
		t.Errorf("%s: the race detector found a data race:\n%s", what, stderr)
	}
}

// syncBuffer is a bytes.Buffer written by exec's copying goroutine and read by the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// proc is a long-running walrelay process. Its output is printed when the test fails;
// it is killed at the end of the test if still running.
type proc struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	output *syncBuffer // stdout and stderr
	done   chan struct{}
	state  *os.ProcessState // set before done is closed
}

func startProc(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, output: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(binary(t), args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.state = p.cmd.ProcessState
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		checkNoRace(t, name, p.output.String())
		if t.Failed() {
			t.Logf("%s (walrelay %s) output:\n%s", name, strings.Join(args, " "), p.output.String())
		}
	})
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %s to %s: %v", sig, p.name, err)
	}
}

// wait waits for the process to exit and returns its exit code (-1: ended by a
// signal); it fails the test when the process outlives timeout.
func (p *proc) wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.state.ExitCode()
	case <-time.After(timeout):
		p.t.Fatalf("%s did not exit within %s", p.name, timeout)
		return 0
	}
}

// stop sends SIGTERM and asserts a graceful exit (code 0) within timeout.
func (p *proc) stop(timeout time.Duration) time.Duration {
	p.t.Helper()
	began := time.Now()
	p.signal(syscall.SIGTERM)
	if code := p.wait(timeout); code != 0 {
		p.t.Fatalf("%s exited with code %d after SIGTERM, want 0", p.name, code)
	}
	return time.Since(began)
}

var poll = testenv.Eventually

// waitStreaming waits until p streams slot: the slot exists, its catch-up pass is done
// and a walsender holds it.
func waitStreaming(t *testing.T, conn *pgx.Conn, slot string, p *proc) {
	t.Helper()
	var err error
	ok := poll(30*time.Second, func() bool {
		if p.exited() {
			return true
		}
		var streaming bool
		err = conn.QueryRow(context.Background(), `SELECT s.active AND w.catchup_done_at IS NOT NULL
			FROM pg_replication_slots s JOIN walrelay_slots w USING (slot_name) WHERE s.slot_name = $1`, slot).Scan(&streaming)
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
		return err == nil && streaming
	})
	switch {
	case p.exited():
		t.Fatalf("%s exited with code %d before it streamed slot %s", p.name, p.state.ExitCode(), slot)
	case err != nil:
		t.Fatalf("read slot %s: %v", slot, err)
	case !ok:
		t.Fatalf("%s did not start streaming slot %s within 30s", p.name, slot)
	}
}

var nameSeq atomic.Int64

// slotName is a replication slot name unique to the test (slot names are
// cluster-wide): lowercase letters, digits and underscores, at most 63 bytes.
func slotName(t testing.TB, suffix string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(t.Name()) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	base := b.String()
	if len(base) > 40 {
		base = base[:40]
	}
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%s/%d", t.Name(), suffix, nameSeq.Add(1)) // unique under -count too
	name := fmt.Sprintf("t_%s_%08x", base, h.Sum32())
	if suffix != "" {
		name += "_" + suffix
	}
	return name
}

// tripwire is a TCP listener that counts connection attempts: pointed to as the
// database and the broker, it proves a run opened no connection at all.
type tripwire struct {
	addr  string
	conns atomic.Int32
}

func newTripwire(t *testing.T) *tripwire {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	tw := &tripwire{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tw.conns.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return tw
}

// writeFile writes a file in the test's temporary directory and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	return path
}
