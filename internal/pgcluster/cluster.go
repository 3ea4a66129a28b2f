package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const (
	// stopTimeout is how long Stop waits for a fast shutdown before SIGKILL.
	stopTimeout = 30 * time.Second
	// abortTimeout is how long an aborted start waits after SIGQUIT.
	abortTimeout = 5 * time.Second
	// pollInterval is the pause between readiness checks.
	pollInterval = 20 * time.Millisecond
	// portAttempts is how often Start retries with a new free port when the
	// one it picked was taken in the meantime.
	portAttempts = 3
)

// errPortInUse marks a start that failed because the port was taken.
var errPortInUse = errors.New("port already in use; pick another Options.Port (0 picks a free one) or stop the server holding it")

// Cluster is a running (or stopped) throwaway PostgreSQL cluster. Its methods
// are safe for concurrent use.
type Cluster struct {
	dir    string // temp dir: data/, socket, postgres.log
	binDir string
	port   int
	as     runAs
	logf   func(format string, args ...any)

	mu struct {
		sync.Mutex
		srv    *server // nil when stopped
		closed bool
	}
}

// server is one run of the postmaster.
type server struct {
	pid    int
	exited chan struct{} // closed once Wait returns
	err    error         // Wait's result; read only after exited is closed
}

// Start runs initdb into a new temporary directory and starts postgres on
// 127.0.0.1 with wal_level=logical, returning once it accepts connections.
// ctx bounds the whole start. On error nothing is left behind.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("validate options: %w", err)
	}
	began := time.Now()
	binDir, err := opts.BinDir, error(nil)
	if binDir == "" {
		binDir, err = BinDir()
	} else if !hasServerBinaries(binDir) {
		err = fmt.Errorf("Options.BinDir %s has no initdb and postgres: %w", binDir, ErrNoBinaries)
	}
	if err != nil {
		return nil, err
	}
	as, err := lookupRunAs()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "walrelay-pg-")
	if err != nil {
		return nil, fmt.Errorf("create cluster directory: %w", err)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs // postgres reports data_directory as an absolute path
	}
	c := &Cluster{dir: dir, binDir: binDir, as: as, logf: opts.Logf}
	if c.logf == nil {
		c.logf = func(string, ...any) {}
	}
	if err := c.create(ctx, opts); err != nil {
		return nil, errors.Join(err, c.removeDir())
	}
	c.logf("pgcluster: initdb done in %s (%s)", time.Since(began).Round(time.Millisecond), dir)

	for attempt := 1; ; attempt++ {
		c.port = opts.Port
		if c.port == 0 {
			if c.port, err = freePort(); err != nil {
				return nil, errors.Join(err, c.removeDir())
			}
		}
		c.mu.Lock()
		err = c.startLocked(ctx)
		c.mu.Unlock()
		if err == nil {
			break
		}
		if opts.Port != 0 || attempt == portAttempts || !errors.Is(err, errPortInUse) {
			return nil, errors.Join(err, c.removeDir())
		}
		c.logf("pgcluster: port %d was taken, trying another", c.port)
	}
	c.logf("pgcluster: postgres ready on 127.0.0.1:%d in %s", c.port, time.Since(began).Round(time.Millisecond))
	return c, nil
}

// create runs initdb and writes the settings.
func (c *Cluster) create(ctx context.Context, opts Options) error {
	if err := c.as.prepareDir(c.dir); err != nil {
		return err
	}
	var out bytes.Buffer
	cmd := c.as.command(c.dir, filepath.Join(c.binDir, "initdb"),
		"--pgdata", c.dataDir(),
		"--username", "postgres",
		"--auth", "trust",
		"--encoding", "UTF8",
		"--locale", "C",
		"--no-sync",
	)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start initdb: %w", err)
	}
	if err := waitCtx(ctx, cmd.Process.Pid, cmd.Wait); err != nil {
		return withOutput(fmt.Errorf("initdb: %w", err), "initdb output", out.String())
	}

	settings := DefaultSettings(c.dir)
	maps.Copy(settings, opts.Settings)
	conf := filepath.Join(c.dataDir(), "postgresql.conf")
	f, err := os.OpenFile(conf, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("open postgresql.conf: %w", err)
	}
	_, err = f.WriteString(confLines(settings))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write postgresql.conf: %w", err)
	}
	return nil
}

// waitCtx runs wait (cmd.Wait of process group leader pid) and kills the
// group when ctx ends first.
func waitCtx(ctx context.Context, pid int, wait func() error) error {
	done := make(chan error, 1)
	go func() { done <- wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-done
		return ctx.Err()
	}
}

// startLocked starts the postmaster and waits until it accepts connections.
// c.mu must be held.
func (c *Cluster) startLocked(ctx context.Context) error {
	logPath := c.logPath()
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor
	if err := c.as.chown(logPath); err != nil {
		return err
	}
	logStart := fileSize(logPath)

	cmd := c.as.command(c.dir, filepath.Join(c.binDir, "postgres"),
		"-D", c.dataDir(), "-p", strconv.Itoa(c.port))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	srv := &server{pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		srv.err = cmd.Wait()
		close(srv.exited)
	}()

	if err := c.waitReady(ctx, srv); err != nil {
		text, _ := readFrom(logPath, logStart)
		if strings.Contains(text, "could not bind IPv4 address") || strings.Contains(text, "Address already in use") {
			err = fmt.Errorf("%w: %w", errPortInUse, err)
		}
		return withOutput(err, logPath, text)
	}
	c.mu.srv = srv
	return nil
}

// waitReady polls until postgres accepts a real connection, it exits, or ctx
// ends; in the last case it shuts the server down.
func (c *Cluster) waitReady(ctx context.Context, srv *server) error {
	cfg, err := pgconn.ParseConfig(c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("parse readiness url: %w", err)
	}
	var lastErr error
	for {
		attemptCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := c.checkOurs(attemptCtx, cfg)
		cancel()
		if err == nil {
			return nil
		}
		lastErr = err
		select {
		case <-srv.exited:
			return fmt.Errorf("postgres exited before accepting connections on port %d (%v)", c.port, srv.err)
		case <-ctx.Done():
			abort(srv)
			return fmt.Errorf("wait for postgres on port %d: %w (last attempt: %v)", c.port, ctx.Err(), lastErr)
		case <-time.After(pollInterval):
		}
	}
}

// checkOurs connects and makes sure the server answering on the port is
// ours: another cluster may hold the port, and then ours is about to exit.
func (c *Cluster) checkOurs(ctx context.Context, cfg *pgconn.Config) error {
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	results, err := conn.Exec(ctx, "SHOW data_directory").ReadAll()
	if err != nil {
		return fmt.Errorf("show data_directory: %w", err)
	}
	if len(results) != 1 || len(results[0].Rows) != 1 || len(results[0].Rows[0]) != 1 {
		return errors.New("show data_directory: unexpected result shape")
	}
	if got := string(results[0].Rows[0][0]); filepath.Clean(got) != c.dataDir() {
		return fmt.Errorf("port %d is served by another cluster (data directory %s)", c.port, got)
	}
	return nil
}

// abort shuts a server down immediately: SIGQUIT, then SIGKILL to its group.
func abort(srv *server) {
	_ = syscall.Kill(srv.pid, syscall.SIGQUIT)
	select {
	case <-srv.exited:
	case <-time.After(abortTimeout):
		_ = syscall.Kill(-srv.pid, syscall.SIGKILL)
		<-srv.exited
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Port returns the TCP port postgres listens on at 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// Dir returns the cluster's temporary directory. The data directory is its
// "data" subdirectory; the unix socket and postgres.log live in it.
func (c *Cluster) Dir() string { return c.dir }

func (c *Cluster) dataDir() string { return filepath.Join(c.dir, "data") }
func (c *Cluster) logPath() string { return filepath.Join(c.dir, logName) }

// URL returns a connection URL for database db as superuser postgres on
// 127.0.0.1, e.g. postgres://postgres@127.0.0.1:5432/db?sslmode=disable.
func (c *Cluster) URL(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// CreateDatabase creates database name, doing nothing if it already exists.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	conn, err := pgconn.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("connect to create database %q: %w", name, err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()).ReadAll()
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		// 42P04: exists. 23505 on the name index: a concurrent create won.
		if pgErr.Code == "42P04" || (pgErr.Code == "23505" && pgErr.ConstraintName == "pg_database_datname_index") {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("create database %q: %w", name, err)
	}
	return nil
}

// Stop stops the server with a fast shutdown (SIGINT to the postmaster),
// waits up to 30s, then kills its process group. The data directory is kept;
// [Cluster.StartAgain] brings it back. Stopping a stopped cluster is a no-op.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopLocked()
}

func (c *Cluster) stopLocked() error {
	srv := c.mu.srv
	if srv == nil {
		return nil
	}
	c.mu.srv = nil
	select {
	case <-srv.exited:
		return withOutput(fmt.Errorf("stop postgres: it had already exited (%v)", srv.err), c.logPath(), c.LogTail(errorTailLines))
	default:
	}
	began := time.Now()
	if err := syscall.Kill(srv.pid, syscall.SIGINT); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal postgres to stop: %w", err)
	}
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-srv.exited:
	case <-timer.C:
		_ = syscall.Kill(-srv.pid, syscall.SIGKILL)
		<-srv.exited
		return fmt.Errorf("stop postgres: no fast shutdown within %s, killed it; see %s", stopTimeout, c.logPath())
	}
	if srv.err != nil {
		return withOutput(fmt.Errorf("stop postgres: %w", srv.err), c.logPath(), c.LogTail(errorTailLines))
	}
	c.logf("pgcluster: postgres on port %d stopped in %s", c.port, time.Since(began).Round(time.Millisecond))
	return nil
}

// StartAgain starts a stopped cluster on the same port and directory and
// waits until it accepts connections.
func (c *Cluster) StartAgain(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return errors.New("start postgres again: cluster is closed; call Start for a new one")
	}
	if c.mu.srv != nil {
		return errors.New("start postgres again: it is running; call Stop first")
	}
	began := time.Now()
	if err := c.startLocked(ctx); err != nil {
		return fmt.Errorf("start postgres again: %w", err)
	}
	c.logf("pgcluster: postgres ready again on 127.0.0.1:%d in %s", c.port, time.Since(began).Round(time.Millisecond))
	return nil
}

// Close stops the server if it is running and removes the temporary
// directory. It is safe to call more than once.
func (c *Cluster) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil
	}
	c.mu.closed = true
	return errors.Join(c.stopLocked(), c.removeDir())
}

func (c *Cluster) removeDir() error {
	if err := os.RemoveAll(c.dir); err != nil {
		return fmt.Errorf("remove cluster directory: %w", err)
	}
	return nil
}
