package relay_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sys/unix"

	"github.com/walrelay/walrelay/internal/pgcluster"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/migrations"
	"github.com/walrelay/walrelay/replication"
)

// The leader's network starts dropping every packet without closing anything, the
// way a dead switch or a partition does. Its server-side sessions then look alive to
// PostgreSQL until TCP gives up on them: without keepalives that takes hours, the
// advisory lock stays held and the standby never leads. With them the server drops
// the dead backends, the standby takes over within 30 s, and nothing committed
// before, during or after the outage is lost.
//
// A userspace proxy that just stops forwarding is not enough: its kernel would still
// acknowledge the server's probes. So the leader's connections cross a veth pair into
// a network namespace (a PostgreSQL of the test's own listens on the host end), and
// the cut drops every IPv4 packet as it arrives on either end: each sender's kernel
// reports success and nothing ever answers.
func TestTakeoverWhenNetworkDropsSilently(t *testing.T) {
	t.Parallel()
	path := newDeadablePath(t)
	pg := startClusterOn(t, path)
	dbURL := migratedDatabase(t, pg, "blackhole")
	broker := testenv.Kafka(t)
	conn := testenv.Connect(t, dbURL)

	// relay_a reaches PostgreSQL through a proxy whose server-side sockets live in
	// the namespace, so the server's peer is on the far side of the path; they end,
	// and the proxy closes relay_a's side, as relay_a's own sockets would.
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	target := net.JoinHostPort(path.hostIP, strconv.Itoa(pg.Port()))
	proxy := testenv.NewProxyDialing(t, func(ctx context.Context) (net.Conn, error) { return path.dial(ctx, target) })
	viaPath := *u
	viaPath.Host = proxy.Addr()
	waitFor(t, 10*time.Second, "PostgreSQL to accept connections across the path", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, viaPath.String())
		if err != nil {
			return false
		}
		c.Close(ctx)
		return true
	})

	a := startInstance(t, viaPath.String(), broker, "hole", "hole_a")
	waitFor(t, 30*time.Second, "hole_a to stream", func() bool { return a.leader(t) && streamer(t, conn, "hole") == "hole_a" })
	b := startInstance(t, dbURL, broker, "hole", "hole_b")
	waitHTTP(t, "http://"+b.addr+"/readyz?streaming", http.StatusServiceUnavailable, "standby")
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	aggs := aggregates("bh", 8)
	written := testenv.WriteTx(t, conn, aggs, "before", 50, false)
	if !consumer.WaitDistinct(30*time.Second, len(written)) {
		t.Fatalf("before the cut: delivered %d of %d", consumer.Distinct(), len(written))
	}

	cut := time.Now()
	path.drop(t)
	written = append(written, testenv.WriteTx(t, conn, aggs, "during", 50, false)...)
	waitFor(t, 30*time.Second-time.Since(cut), "hole_b to take over within 30s of the cut", func() bool {
		return streamer(t, conn, "hole") == "hole_b"
	})
	t.Logf("takeover %s after the network started dropping packets", time.Since(cut).Round(time.Millisecond))
	waitFor(t, 10*time.Second, "leader gauges to swap", func() bool { return b.leader(t) && !a.leader(t) })

	written = append(written, testenv.WriteTx(t, conn, aggs, "after", 50, false)...)
	if !consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("delivered %d of %d", consumer.Distinct(), len(written))
	}
	for _, ev := range written {
		if consumer.Count(ev.ID) == 0 {
			t.Fatalf("event %s (%s) lost across the takeover", ev.ID, ev.EventType)
		}
	}

	// When the network comes back, the old leader finds the lock taken and waits.
	path.heal(t)
	waitHTTP(t, "http://"+a.addr+"/readyz?streaming", http.StatusServiceUnavailable, "standby")
	if s := streamer(t, conn, "hole"); s != "hole_b" {
		t.Fatalf("after the network came back %q streams, want hole_b", s)
	}
}

// privileged ends a test that cannot get a network namespace or a PostgreSQL of its
// own: under CI that is a failure, elsewhere a skip that says why.
func privileged(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip("skipping: " + msg)
}

// deadablePath is a veth pair from the host into a network namespace of the test's
// own, which drop can turn into a black hole.
type deadablePath struct {
	ns           string // namespace name
	hostDev      string // host end
	nsDev        string // namespace end
	hostIP, nsIP string
	nsHandle     *os.File // /run/netns/<ns>, for setns
}

func newDeadablePath(t *testing.T) *deadablePath {
	t.Helper()
	if os.Geteuid() != 0 {
		privileged(t, "a network namespace needs root (run as root, or with CAP_NET_ADMIN and CAP_SYS_ADMIN)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		privileged(t, "the ip command (Debian package iproute2) is missing: %v", err)
	}
	if _, err := exec.LookPath("tc"); err != nil {
		privileged(t, "the tc command (Debian package iproute2) is missing: %v", err)
	}
	// A /30 in 198.18.0.0/15, the range set aside for network tests.
	id := rand.N(1 << 14)
	p := &deadablePath{
		ns:      fmt.Sprintf("walrelay-bh-%d-%04x", os.Getpid(), id),
		hostDev: fmt.Sprintf("wrbh%04xh", id),
		nsDev:   fmt.Sprintf("wrbh%04xn", id),
		hostIP:  fmt.Sprintf("198.18.%d.%d", id>>6, (id&63)<<2|1),
		nsIP:    fmt.Sprintf("198.18.%d.%d", id>>6, (id&63)<<2|2),
	}
	if err := ipCmd("netns", "add", p.ns); err != nil {
		privileged(t, "create a network namespace: %v", err)
	}
	t.Cleanup(func() {
		// Deleting the namespace deletes the pair; the host end goes explicitly too in
		// case a socket still pins the namespace.
		_ = ipCmd("link", "del", p.hostDev)
		if p.nsHandle != nil {
			p.nsHandle.Close()
		}
		if err := ipCmd("netns", "del", p.ns); err != nil {
			t.Errorf("remove network namespace %s (remove it with: ip netns del %s): %v", p.ns, p.ns, err)
		}
	})
	steps := [][]string{
		{"link", "add", p.hostDev, "type", "veth", "peer", "name", p.nsDev, "netns", p.ns},
		{"addr", "add", p.hostIP + "/30", "dev", p.hostDev},
		{"link", "set", p.hostDev, "up"},
		{"-n", p.ns, "addr", "add", p.nsIP + "/30", "dev", p.nsDev},
		{"-n", p.ns, "link", "set", p.nsDev, "up"},
	}
	for _, args := range steps {
		if err := ipCmd(args...); err != nil {
			privileged(t, "set up the veth path: %v", err)
		}
	}
	h, err := os.Open("/run/netns/" + p.ns)
	if err != nil {
		privileged(t, "open the network namespace: %v", err)
	}
	p.nsHandle = h
	// Nothing listens on port 1: a refusal proves the way there and back.
	if c, err := p.dial(context.Background(), net.JoinHostPort(p.hostIP, "1")); err != nil && !errors.Is(err, unix.ECONNREFUSED) {
		privileged(t, "dial across the veth path: %v", err)
	} else if err == nil {
		c.Close()
	}
	return p
}

// drop makes the path a black hole: every IPv4 packet is discarded as it arrives on
// either end (a classic BPF filter returning TC_ACT_SHOT), after the sender's kernel
// counted it as sent. ARP still passes, so neither side gets a "host unreachable"
// that a real dead network would not give either.
func (p *deadablePath) drop(t *testing.T) {
	t.Helper()
	for _, tc := range p.tc() {
		if err := tc("qdisc", "add", "clsact"); err != nil {
			privileged(t, "add a clsact qdisc: %v", err)
		}
		if err := tc("filter", "add", "ingress", "protocol", "ip", "bpf", "da", "bytecode", "1,6 0 0 2"); err != nil {
			privileged(t, "add the dropping filter (needs CONFIG_NET_CLS_BPF): %v", err)
		}
	}
}

// heal lets packets through again.
func (p *deadablePath) heal(t *testing.T) {
	t.Helper()
	for _, tc := range p.tc() {
		if err := tc("qdisc", "del", "clsact"); err != nil {
			t.Fatalf("remove the dropping filter: %v", err)
		}
	}
}

// tc returns, for each end of the path, a tc command for its device: "dev <end>"
// goes after the first two arguments.
func (p *deadablePath) tc() []func(args ...string) error {
	end := func(ns []string, dev string) func(args ...string) error {
		return func(args ...string) error {
			return run("tc", slices.Concat(ns, args[:2], []string{"dev", dev}, args[2:])...)
		}
	}
	return []func(args ...string) error{end(nil, p.hostDev), end([]string{"-n", p.ns}, p.nsDev)}
}

func ipCmd(args ...string) error { return run("ip", args...) }

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// dial connects to addr from inside the namespace, the way walrelay dials
// PostgreSQL (replication.TuneKeepalives), so that the socket stands in for one of
// relay_a's own: when the path dies it ends as theirs would. The socket is created
// on a thread that enters the namespace and then goes back. The thread must not
// die (a goroutine ending while locked kills its thread): a PostgreSQL forked from
// it would get its parent-death signal.
func (p *deadablePath) dial(ctx context.Context, addr string) (net.Conn, error) {
	var tuned pgconn.Config
	replication.TuneKeepalives(&tuned)
	type result struct {
		conn net.Conn
		err  error
	}
	res := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			res <- result{nil, fmt.Errorf("open this thread's network namespace: %w", err)}
			return
		}
		defer home.Close()
		if err := unix.Setns(int(p.nsHandle.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			res <- result{nil, fmt.Errorf("enter network namespace %s: %w", p.ns, err)}
			return
		}
		c, err := tuned.DialFunc(ctx, "tcp", addr)
		res <- result{c, err}
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			select {} // stuck in the namespace: keep the thread, locked, for good
		}
		runtime.UnlockOSThread()
	}()
	r := <-res
	return r.conn, r.err
}

// startClusterOn starts a PostgreSQL of the test's own that also listens on addr and
// trusts the namespace's end of the path. (The shared cluster listens on loopback
// only, and the listen address cannot change without a restart.)
func startClusterOn(t *testing.T, p *deadablePath) *pgcluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Options{Settings: map[string]string{
		"listen_addresses":   "127.0.0.1," + p.hostIP,
		"synchronous_commit": "on",
	}})
	if errors.Is(err, pgcluster.ErrNoBinaries) {
		privileged(t, "%v", err)
	}
	if err != nil {
		t.Fatalf("start a PostgreSQL for the path: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("stop the path's PostgreSQL: %v", err)
		}
	})
	conn := testenv.Connect(t, c.URL("postgres"))
	var hba string
	if err := conn.QueryRow(ctx, "SHOW hba_file").Scan(&hba); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(hba, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatalf("open pg_hba.conf: %v", err)
	}
	_, err = fmt.Fprintf(f, "\nhost all all %s/32 trust\n", p.nsIP)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("write pg_hba.conf: %v", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	return c
}

func migratedDatabase(t *testing.T, c *pgcluster.Cluster, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.CreateDatabase(ctx, name); err != nil {
		t.Fatal(err)
	}
	dbURL := c.URL(name)
	if _, err := migrations.Up(ctx, dbURL, nil); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return dbURL
}
