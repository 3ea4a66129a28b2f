package relay_test

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
)

// instance is one of several relays on the same slot, told apart by application_name.
type instance struct {
	name string
	reg  *prometheus.Registry
	addr string
	rn   *running
}

func startInstance(t *testing.T, dbURL string, broker interface{ ListenAddrs() []string }, slot, name string) *instance {
	t.Helper()
	in := &instance{name: name, reg: prometheus.NewRegistry(), addr: freeAddr(t)}
	in.rn = startWithBrokers(t, testenv.WithParams(dbURL, map[string]string{"application_name": name}), broker.ListenAddrs(), slot,
		func(c *config) { c.Registry, c.MetricsAddr = in.reg, in.addr })
	return in
}

func (in *instance) leader(t *testing.T) bool {
	t.Helper()
	fams, err := in.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "walrelay_leader" {
			return f.GetMetric()[0].GetGauge().GetValue() == 1
		}
	}
	return false
}

// streamer returns the application_name of the walsender streaming the slot, if any.
func streamer(t *testing.T, conn *pgx.Conn, slot string) string {
	t.Helper()
	var name *string
	err := conn.QueryRow(context.Background(), `SELECT a.application_name FROM pg_replication_slots s
		JOIN pg_stat_activity a ON a.pid = s.active_pid WHERE s.slot_name = $1`, slot).Scan(&name)
	if err == pgx.ErrNoRows || name == nil {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return *name
}

// Two instances on one slot: one streams, the other is a standby (leader 0,
// /readyz?streaming 503 "standby"). When the leader's network is cut (its connections go through a
// proxy that drops them and refuses new ones), the standby takes over within ten
// seconds and nothing committed meanwhile is lost.
func TestStandbyTakesOver(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, u.Host)
	viaProxy := *u
	viaProxy.Host = proxy.Addr()
	a := startInstance(t, viaProxy.String(), broker, "ha", "relay_a")
	// The slot shows as active while it is being created too: wait for replication.
	waitFor(t, 30*time.Second, "relay_a to stream", func() bool { return a.leader(t) && streamer(t, conn, "ha") == "relay_a" })
	b := startInstance(t, dbURL, broker, "ha", "relay_b")
	waitHTTP(t, "http://"+b.addr+"/readyz?streaming", http.StatusServiceUnavailable, "standby")
	if !a.leader(t) || b.leader(t) {
		t.Fatalf("leader gauges: a=%v b=%v, want a only", a.leader(t), b.leader(t))
	}
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)

	var mu sync.Mutex
	var written []outbox.Event
	stop := make(chan struct{})
	done := make(chan struct{})
	writer := testenv.Connect(t, dbURL)
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			evs := testenv.WriteTx(t, writer, aggregates("ha", 10), "ha", 10, false)
			mu.Lock()
			written = append(written, evs...)
			mu.Unlock()
		}
	}()
	stopWriter := sync.OnceFunc(func() { close(stop); <-done })
	defer stopWriter()
	if !consumer.WaitDistinct(30*time.Second, 100) {
		t.Fatal("no events before the cut")
	}

	cut := time.Now()
	proxy.Down()
	waitFor(t, 10*time.Second, "relay_b to take over", func() bool { return streamer(t, conn, "ha") == "relay_b" })
	t.Logf("takeover after the leader was cut: %s", time.Since(cut).Round(time.Millisecond))
	waitFor(t, 10*time.Second, "leader gauges to swap", func() bool { return b.leader(t) && !a.leader(t) })
	proxy.Up()

	stopWriter()
	if !consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("delivered %d of %d", consumer.Distinct(), len(written))
	}
	for _, ev := range written {
		if consumer.Count(ev.ID) == 0 {
			t.Fatalf("event %s lost across the takeover", ev.ID)
		}
	}
	waitHTTP(t, "http://"+a.addr+"/readyz?streaming", http.StatusServiceUnavailable, "standby")
}

// A split-brain attempt: the leader's lock session dies while its walsender lives.
// The standby takes the lock, but never streams while the old leader does; the old
// leader notices and stops; there is never more than one streamer, and no event is lost.
func TestSplitBrainAttempt(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	a := startInstance(t, dbURL, broker, "split", "split_a")
	waitFor(t, 30*time.Second, "split_a to stream", func() bool { return a.leader(t) && streamer(t, conn, "split") == "split_a" })
	b := startInstance(t, dbURL, broker, "split", "split_b")
	waitHTTP(t, "http://"+b.addr+"/readyz?streaming", http.StatusServiceUnavailable, "standby")

	var lockPID int
	if err := conn.QueryRow(context.Background(), `SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = 'split_a'`).Scan(&lockPID); err != nil {
		t.Fatalf("find split_a's lock session: %v", err)
	}
	if _, err := conn.Exec(context.Background(), "SELECT pg_terminate_backend($1)", lockPID); err != nil {
		t.Fatal(err)
	}
	written := testenv.WriteTx(t, conn, aggregates("sb", 5), "split", 50, false)
	seen := map[string]bool{}
	waitFor(t, 15*time.Second, "split_b to stream", func() bool {
		var streamers int
		if err := conn.QueryRow(context.Background(),
			"SELECT count(*) FROM pg_stat_replication r JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = 'split'",
		).Scan(&streamers); err != nil {
			t.Fatal(err)
		}
		if streamers > 1 {
			t.Fatalf("%d walsenders stream the slot at once", streamers)
		}
		seen[streamer(t, conn, "split")] = true
		return streamer(t, conn, "split") == "split_b"
	})
	if got := testutil.ToFloat64(gauge(t, a.reg, "walrelay_leader")); got != 0 {
		t.Errorf("old leader still reports walrelay_leader %v", got)
	}
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	if !consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("delivered %d of %d", consumer.Distinct(), len(written))
	}
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			v := f.GetMetric()[0].GetGauge().GetValue()
			return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: "copy"}, func() float64 { return v })
		}
	}
	t.Fatalf("metric %s not registered", name)
	return nil
}
