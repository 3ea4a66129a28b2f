// Package brokers starts the real NATS, Redis and RabbitMQ servers that integration
// tests need, each on free loopback ports with its data in a temporary directory,
// so that tests never touch the servers a machine happens to run (on 4222, 6379,
// 5672) and run the same on a fresh one.
//
// NATS and Redis start in milliseconds, so every test gets servers of its own,
// stopped when it ends. RabbitMQ takes seconds to boot: one node per test binary is
// shared by its tests (which isolate themselves by exchange and queue names) and
// stopped by [StopShared], which testenv.Main calls after the tests.
//
// A missing server binary fails the test under CI (CI set) and skips it elsewhere,
// naming the package to install. The WALRELAY_TEST_*_ environment variables name an
// existing server to use instead, as an explicit opt-in.
//
// The package imports nothing of walrelay's, so the sinks' internal tests can use it
// (package testenv imports the sinks through the relay).
package brokers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	// startTimeout bounds a boot: RabbitMQ needs ~8s on an idle 2-core machine.
	startTimeout = 2 * time.Minute
	// stopTimeout is how long a server may take to exit after SIGTERM before SIGKILL.
	stopTimeout = 30 * time.Second
	// pollInterval is the pause between readiness probes.
	pollInterval = 25 * time.Millisecond
	// portAttempts is how often a start is retried with new ports when the server
	// exits during boot (a picked port was taken in the meantime).
	portAttempts = 3
)

var (
	// errNoBinary marks a server that is not installed.
	errNoBinary = errors.New("server binary not found")
	// errExited marks a server that exited during boot, which a port taken between
	// picking and binding it explains, so a start with new ports may succeed.
	errExited = errors.New("exited during start")
)

// lookBinary finds a server binary: on PATH first, then at the Debian package's path
// (/usr/sbin is not on every user's PATH). The error wraps errNoBinary and names the
// package to install.
func lookBinary(name, pkg string, debianPaths ...string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, p := range debianPaths {
		if isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w on PATH or at %s; install it with: apt-get install -y %s (or make setup)",
		name, errNoBinary, strings.Join(debianPaths, ", "), pkg)
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// unavailable ends a test that cannot have its server: a missing binary skips it,
// except under CI, where every test must run; anything else fails it.
func unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if errors.Is(err, errNoBinary) && os.Getenv("CI") == "" {
		t.Skipf("skipping integration test: %s: %v", what, err)
	}
	t.Fatalf("integration test needs %s: %v", what, err)
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		lns = append(lns, ln) // held open until all are picked, so they differ
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// spec is how to run one server: its command, and the probe that tells when it
// answers.
type spec struct {
	name  string
	bin   string
	args  []string
	env   []string // added to the environment; nil inherits it unchanged
	dir   string   // working directory; the server's log goes to dir/<name>.log
	probe func(ctx context.Context) error
}

// process is a running server, in a process group of its own so that stopping it
// reaches the children it forks (RabbitMQ's start script runs the Erlang VM).
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed when Wait returned
	waitErr error         // read only after exited is closed
}

// start runs the server and waits until its probe succeeds, it exits, or
// startTimeout passes. A server that does not become ready is stopped.
func start(s spec) (*process, error) {
	logPath := filepath.Join(s.dir, s.name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child holds its own descriptor
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	if s.env != nil {
		cmd.Env = append(os.Environ(), s.env...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Pdeathsig: a test binary killed without cleanup must not leave servers behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.bin, err)
	}
	p := &process{name: s.name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	var last error
	for {
		probeCtx, probeCancel := context.WithTimeout(ctx, 5*time.Second)
		last = s.probe(probeCtx)
		probeCancel()
		if last == nil {
			return p, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("%s %w (%v); its log:\n%s", s.name, errExited, p.waitErr, p.logTail())
		case <-ctx.Done():
			p.stop()
			return nil, fmt.Errorf("%s did not answer within %s (last probe: %v); its log:\n%s", s.name, startTimeout, last, p.logTail())
		case <-time.After(pollInterval): // polling readiness with a deadline
		}
	}
}

// stop sends SIGTERM to the server's process group, and SIGKILL when it has not
// exited within stopTimeout. RabbitMQ's script passes SIGTERM on to the Erlang VM and
// waits for it, so the leader's exit means the node is down.
func (p *process) stop() {
	pgid := p.cmd.Process.Pid // Setpgid: the group's id is the leader's pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // the unreaped leader keeps the group's id ours
		<-p.exited
	}
}

// logTail is the end of the server's log, for failure messages.
func (p *process) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	const max = 4000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// startWithPorts picks n free ports, builds the spec for them and starts it, with new
// ports when the server exits during boot because another process took one.
func startWithPorts(n int, build func(attempt int, ports []int) (spec, error)) (*process, []int, error) {
	var err error
	for attempt := range portAttempts {
		var ports []int
		if ports, err = freePorts(n); err != nil {
			return nil, nil, err
		}
		var s spec
		if s, err = build(attempt, ports); err != nil {
			return nil, nil, err
		}
		var p *process
		if p, err = start(s); err == nil {
			return p, ports, nil
		}
		if !errors.Is(err, errExited) {
			return nil, nil, err
		}
	}
	return nil, nil, err
}
