package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/pgcluster"
)

// pgSettings are the throwaway cluster's postgresql.conf settings on top of
// pgcluster's defaults (fsync, full_page_writes off; wal_level logical).
var pgSettings = map[string]string{
	// Commits wait for the WAL flush, so the walsender sees each commit at once
	// (asynchronous commit flushes every wal_writer_delay, 200ms).
	"synchronous_commit": "on",
	// Explicit CHECKPOINTs before each timed phase, not WAL volume, decide when
	// checkpoints happen.
	"max_wal_size": "8GB",
}

// env is what every scenario shares: the PostgreSQL cluster, the broker process
// and the binaries.
type env struct {
	opts     options
	work     string // temporary directory: binaries, logs
	walrelay string // the relay binary
	floor    string // wakefloor, the idle step's reference process
	// cycleFloor is cyclefloor, the moderate rates' reference process.
	cycleFloor string
	recvlog    string // pg_recvlogical
	cluster    *pgcluster.Cluster
	broker     *proc
	brokerAt   string // host:port
	pgVer      string
	runs       int // relay starts so far, for log names
	// onPublishDefault is the relay binary's default --on-publish in stream mode, ""
	// when its help does not name it.
	onPublishDefault string
}

// resolve names the --on-publish a run uses: its own, or the binary's default
// ("default" when the binary's help does not name it).
func (e *env) resolve(onPublish string) string {
	switch {
	case onPublish != "":
		return onPublish
	case e.onPublishDefault != "":
		return e.onPublishDefault
	}
	return "default"
}

// setup builds the binaries and starts PostgreSQL and the broker. On error, what
// was started is left for close.
func setup(ctx context.Context, opts options) (*env, error) {
	e := &env{opts: opts}
	var err error
	if e.work, err = os.MkdirTemp("", "walrelay-bench-"); err != nil {
		return e, fmt.Errorf("create work directory: %w", err)
	}
	progress("work directory %s (binaries, logs)", e.work)

	if opts.walrelay != "" {
		e.walrelay = opts.walrelay
	} else {
		e.walrelay = filepath.Join(e.work, "walrelay")
		progress("building walrelay (go build ./cmd/walrelay)")
		if err := goBuild(ctx, productDir(), e.walrelay, "github.com/walrelay/walrelay/cmd/walrelay"); err != nil {
			return e, err
		}
	}
	if e.onPublishDefault, err = defaultOnPublish(ctx, e.walrelay); err != nil {
		return e, err
	}
	kfakeBin := filepath.Join(e.work, "kfakeserver")
	if err := goBuild(ctx, harnessDir(), kfakeBin, "github.com/walrelay/walrelay/bench/kfakeserver"); err != nil {
		return e, err
	}

	e.floor = filepath.Join(e.work, "wakefloor")
	if err := goBuild(ctx, harnessDir(), e.floor, "github.com/walrelay/walrelay/bench/wakefloor"); err != nil {
		return e, err
	}
	e.cycleFloor = filepath.Join(e.work, "cyclefloor")
	if err := goBuild(ctx, harnessDir(), e.cycleFloor, "github.com/walrelay/walrelay/bench/cyclefloor"); err != nil {
		return e, err
	}

	binDir, err := pgcluster.BinDir()
	if err != nil {
		return e, err
	}
	e.recvlog = filepath.Join(binDir, "pg_recvlogical")
	if _, err := os.Stat(e.recvlog); err != nil {
		return e, fmt.Errorf("pg_recvlogical not found next to initdb: %w", err)
	}
	progress("starting PostgreSQL (%s)", binDir)
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if e.cluster, err = pgcluster.Start(startCtx, pgcluster.Options{Settings: pgSettings}); err != nil {
		return e, fmt.Errorf("start postgresql: %w", err)
	}
	conn, err := pgx.Connect(ctx, e.cluster.URL("postgres"))
	if err != nil {
		return e, fmt.Errorf("connect to postgresql: %w", err)
	}
	err = conn.QueryRow(ctx, "SELECT current_setting('server_version')").Scan(&e.pgVer)
	conn.Close(ctx)
	if err != nil {
		return e, fmt.Errorf("read server version: %w", err)
	}

	if err := e.startBroker(ctx, kfakeBin); err != nil {
		return e, err
	}
	return e, nil
}

// close stops the subprocesses and the cluster and removes the work directory
// (unless -keep).
func (e *env) close() {
	killAll(10 * time.Second)
	if e.cluster != nil {
		if err := e.cluster.Close(); err != nil {
			progress("stop postgresql: %v", err)
		}
	}
	if e.work != "" && !e.opts.keep {
		_ = os.RemoveAll(e.work)
	} else if e.work != "" {
		progress("kept %s", e.work)
	}
}

// goBuild builds pkg into out from dir: the relay from the product's module, so that
// it is built with the product's own go.mod as `make build` builds it, and the
// harness's tools from the harness's module.
func goBuild(ctx context.Context, dir, out, pkg string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", out, pkg)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// startBroker runs kfakeserver on a free port and waits for its "listening" line.
func (e *env) startBroker(ctx context.Context, bin string) error {
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		p, err := startProc("kfakeserver", filepath.Join(e.work, "kfakeserver.log"), w,
			bin, "-port", fmt.Sprint(port), "-partitions", fmt.Sprint(e.opts.partitions), "-produce-delay", e.opts.brokerDelay.String())
		w.Close()
		if err != nil {
			r.Close()
			return err
		}
		line := make(chan string, 1)
		go func() {
			s, _ := bufio.NewReader(r).ReadString('\n')
			line <- s
			r.Close()
		}()
		select {
		case s := <-line:
			if addr, ok := strings.CutPrefix(strings.TrimSpace(s), "listening "); ok {
				e.broker, e.brokerAt = p, addr
				progress("kfake broker (separate process, pid %d) on %s", p.pid(), addr)
				return nil
			}
			_ = p.stop(5 * time.Second)
			if attempt == 3 {
				return fmt.Errorf("kfakeserver did not start: %s", tailFile(p.logPath, 10))
			}
		case <-time.After(30 * time.Second):
			_ = p.stop(5 * time.Second)
			return errors.New("kfakeserver did not report its address within 30s")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// watchBroker cancels the run with the reason when the broker ends before close
// stops it, so that every wait ends at once instead of timing out against a broker
// that is gone. Only close stops it, so anything else is an outside kill (a
// `pkill -f kfakeserver` elsewhere on the machine) or a crash.
func (e *env) watchBroker(ctx context.Context, cancel context.CancelCauseFunc) {
	select {
	case <-ctx.Done():
	case <-e.broker.done:
		cancel(fmt.Errorf("the kfake broker (pid %d) ended during the run (%s), which the harness did not ask for; log tail:\n%s",
			e.broker.pid(), e.broker.cmd.ProcessState, tailFile(e.broker.logPath, 5)))
	}
}

// harnessDir is the harness module's root (bench/), from this file's compile-time
// path, so the harness builds its tools from wherever it runs; "" (the current
// directory) when that path is not on this machine.
func harnessDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return ""
	}
	return moduleRoot(filepath.Dir(file))
}

// productDir is the walrelay module's root, the harness module's parent directory,
// where the relay binary is built; "" when it is not on this machine.
func productDir() string {
	if h := harnessDir(); h != "" {
		return moduleRoot(filepath.Dir(h))
	}
	return ""
}

// moduleRoot is dir when it holds a go.mod, "" otherwise.
func moduleRoot(dir string) string {
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return ""
	}
	return dir
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// createDatabase creates a database and lets the relay binary under test create its
// schema (`walrelay migrate`), so that a build with migrations this harness does not
// know (-walrelay) gets the schema it expects.
func (e *env) createDatabase(ctx context.Context, name string) (string, error) {
	if err := e.cluster.CreateDatabase(ctx, name); err != nil {
		return "", err
	}
	url := e.cluster.URL(name)
	out, err := exec.CommandContext(ctx, e.walrelay, "migrate", "--database-url", url).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("walrelay migrate on %s: %w: %s", name, err, out)
	}
	return url, nil
}

// dropDatabase drops the database's replication slots, then the database.
func (e *env) dropDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, e.cluster.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
		WHERE database = $1 AND NOT active`, name); err != nil {
		return fmt.Errorf("drop slots of %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// quiesce vacuums and analyses the outbox table, checkpoints and has the kernel
// write its dirty pages out, so that neither autovacuum, nor a checkpoint the previous
// phase made due, nor the writeback of the previous phase's files runs during the
// next timed phase.
func quiesce(ctx context.Context, conn *pgx.Conn) error {
	for _, sql := range []string{"VACUUM (ANALYZE) outbox_events", "CHECKPOINT"} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("%s: %w", sql, err)
		}
	}
	syscall.Sync()
	return nil
}

// clearOutbox empties the outbox of the rows earlier drains published, before a new
// slot is primed. The priming relay's catch-up pass would publish them all again
// and mark each one, after the slot's start: the next drain's walsender would then
// decode those marks before the backlog, and pg_recvlogical's, whose slot is created
// after them, would not.
func clearOutbox(ctx context.Context, conn *pgx.Conn) error {
	if _, err := conn.Exec(ctx, "TRUNCATE outbox_events"); err != nil {
		return fmt.Errorf("empty the outbox: %w", err)
	}
	return nil
}

// currentLSN returns pg_current_wal_lsn() as text and as a number.
func currentLSN(ctx context.Context, conn *pgx.Conn) (string, int64, error) {
	var s string
	var n int64
	err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text, pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint").Scan(&s, &n)
	if err != nil {
		return "", 0, fmt.Errorf("read wal position: %w", err)
	}
	return s, n, nil
}

// slotLag returns the WAL bytes between the server's position and the slot's
// confirmed_flush_lsn.
func slotLag(ctx context.Context, conn *pgx.Conn, slot string) (int64, error) {
	var lag int64
	err := conn.QueryRow(ctx, `SELECT COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::bigint
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&lag)
	if err != nil {
		return 0, fmt.Errorf("read lag of slot %s: %w", slot, err)
	}
	return lag, nil
}

// walsenderPID returns the pid of the process streaming the slot, 0 when none.
func walsenderPID(ctx context.Context, conn *pgx.Conn, slot string) int {
	var pid *int32
	if err := conn.QueryRow(ctx, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&pid); err != nil || pid == nil {
		return 0
	}
	return int(*pid)
}

// postgresCPU returns the CPU seconds the whole PostgreSQL server (postmaster and
// every backend, live or exited) has used so far, 0 when unknown.
func (e *env) postgresCPU() float64 {
	data, err := os.ReadFile(filepath.Join(e.cluster.Dir(), "data", "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0
	}
	return treeCPU(pid)
}
