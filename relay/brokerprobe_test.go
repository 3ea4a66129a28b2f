package relay_test

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/internal/testenv/brokers"
	"github.com/walrelay/walrelay/ops"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/sink/sinks"
)

// The bound the probe keeps: a broker lost while nothing is in flight is seen within
// the ack timeout plus one probe interval. probeSlack covers the watch's tick and a
// busy test machine's scheduling.
const (
	probeAckTimeout = 2 * time.Second
	probeInterval   = time.Second
	probeSlack      = 1500 * time.Millisecond
)

// closedCauses are what a probe of a closed broker says: its open connection ended,
// or a new one was refused.
var closedCauses = []string{"connection refused", "EOF"}

// A Kafka broker closed while the outbox is idle (its port refuses connections) is
// an incident within the ack timeout plus one probe interval, with no event sent:
// walrelay_broker_up 0, /readyz 503 with the reason, a WARN line, a status problem;
// when it is back on its port every signal turns back, and an event written then
// is delivered.
func TestIdleKafkaBrokerClosedIsSeen(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	broker := newRestartableKafka(t)
	in := startProbed(t, dbURL, broker.addrs(), "idleclosed", "idleclosed_a", nil)
	deliverOne(t, conn, broker.addrs(), "before")
	waitHTTP(t, in.url()+"/readyz", http.StatusOK, "streaming")

	broker.close()
	in.expectDown(t, time.Now(), closedCauses...)

	broker.restart()
	in.expectBack(t, http.StatusOK, "streaming")
	deliverOne(t, conn, broker.addrs(), "after")
}

// A Kafka broker that keeps accepting connections and requests but answers none,
// while the outbox is idle, is seen within the ack timeout plus one probe interval
// (the probe gives up after the ack timeout and says the broker is silent); when it
// answers again every signal turns back.
func TestIdleKafkaBrokerSilentIsSeen(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	broker := testenv.Kafka(t)
	var silent atomic.Bool
	broker.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		broker.KeepControl()
		return nil, nil, silent.Load() // handled with no answer: the request is swallowed
	})
	in := startProbed(t, dbURL, broker.ListenAddrs(), "idlesilent", "idlesilent_a", nil)
	deliverOne(t, conn, broker.ListenAddrs(), "before")
	waitHTTP(t, in.url()+"/readyz", http.StatusOK, "streaming")

	silent.Store(true)
	in.expectDown(t, time.Now(), "no answer within the ack timeout")

	silent.Store(false)
	in.expectBack(t, http.StatusOK, "streaming")
	deliverOne(t, conn, broker.ListenAddrs(), "after")
}

// A standby (an instance waiting for the leadership lock) probes the broker too: it
// sees a broker closed while the outbox is idle as the leader does, within the same
// bound (its /readyz 503 naming the broker), and turns back with it (/readyz 200,
// a healthy standby).
func TestIdleBrokerLostIsSeenByStandby(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	broker := newRestartableKafka(t)
	leader := startProbed(t, dbURL, broker.addrs(), "idlestandby", "idlestandby_a", nil)
	waitFor(t, 30*time.Second, "idlestandby_a to stream", func() bool {
		return gaugeValue(t, leader.reg, "walrelay_leader") == 1 && streamer(t, conn, "idlestandby") == "idlestandby_a"
	})
	standby := startProbed(t, dbURL, broker.addrs(), "idlestandby", "idlestandby_b", nil)
	waitHTTP(t, standby.url()+"/readyz?streaming", http.StatusServiceUnavailable, "standby")
	deliverOne(t, conn, broker.addrs(), "before")

	broker.close()
	closed := time.Now()
	standby.expectDown(t, closed, closedCauses...)
	leader.expectDown(t, closed, closedCauses...)
	if got := gaugeValue(t, standby.reg, "walrelay_leader"); got != 0 {
		t.Fatalf("walrelay_leader = %v on the standby, want 0: the test means a standby", got)
	}

	broker.restart()
	standby.expectBack(t, http.StatusOK, "standby") // a healthy standby is ready again
	leader.expectBack(t, http.StatusOK, "streaming")
}

// A NATS server stopped while the outbox is idle is seen the same way, within the
// same bound, and its return too.
func TestIdleNATSServerStoppedIsSeen(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	srv := brokers.NATSServer(t)
	in := startProbed(t, dbURL, nil, "idlenats", "idlenats_a", func(c *config) {
		c.Sinks.Kind = sinks.NATS
		c.Sinks.NATS.URL = srv.URL
		c.Sinks.NATS.Stream = "IDLENATS"
		c.Sinks.NATS.CreateStream = true
		c.BrokerAddrs = []string{srv.URL}
	})
	waitHTTP(t, in.url()+"/readyz", http.StatusOK, "streaming")

	srv.Stop()
	in.expectDown(t, time.Now(), "not connected")

	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	in.expectBack(t, http.StatusOK, "streaming")
}

// probed is a relay under test with the probe on, its metrics and HTTP address.
type probed struct {
	*running
	name    string
	reg     *prometheus.Registry
	addr    string
	dbURL   string
	slot    string
	brokers []string
}

// startProbed starts a relay on slot whose ack timeout and probe interval are the
// tests' bound, named name (its application_name).
func startProbed(t *testing.T, dbURL string, brokerAddrs []string, slot, name string, tweak func(*config)) *probed {
	t.Helper()
	p := &probed{name: name, reg: prometheus.NewRegistry(), addr: freeAddr(t), dbURL: dbURL, slot: slot, brokers: brokerAddrs}
	p.running = startWithBrokers(t, testenv.WithParams(dbURL, map[string]string{"application_name": name}), brokerAddrs, slot,
		func(c *config) {
			c.Registry, c.MetricsAddr = p.reg, p.addr
			c.AckTimeout, c.BrokerProbeInterval = probeAckTimeout, probeInterval
			c.BrokerAddrs = brokerAddrs
			if tweak != nil {
				tweak(c)
			}
		})
	return p
}

func (p *probed) url() string { return "http://" + p.addr }

// expectDown waits for walrelay_broker_up 0 and fails unless it came within the
// bound of the fault at faultAt; then it checks the other signals: /readyz 503 with
// the reason (containing one of causes: the probe's error), the WARN line, and the
// relay's problem in status.
func (p *probed) expectDown(t *testing.T, faultAt time.Time, causes ...string) {
	t.Helper()
	bound := probeAckTimeout + probeInterval
	if !pollUntil(bound+30*time.Second, func() bool { return gaugeValue(t, p.reg, "walrelay_broker_up") == 0 }) {
		t.Fatalf("%s: walrelay_broker_up still 1 %s after the broker was lost with nothing in flight", p.name, time.Since(faultAt).Round(time.Millisecond))
	}
	seen := time.Since(faultAt)
	t.Logf("%s: broker loss seen after %s (ack timeout %s + probe interval %s)", p.name, seen.Round(time.Millisecond), probeAckTimeout, probeInterval)
	if seen > bound+probeSlack {
		t.Errorf("%s: seen after %s, want within the ack timeout plus one probe interval (%s)", p.name, seen.Round(time.Millisecond), bound)
	}
	body := waitHTTP(t, p.url()+"/readyz", http.StatusServiceUnavailable, "broker not answering")
	t.Logf("%s: /readyz: %s", p.name, body)
	if !slices.ContainsFunc(causes, func(c string) bool { return strings.Contains(body, c) }) {
		t.Errorf("%s: /readyz says none of %q: %s", p.name, causes, body)
	}
	var warn string
	for line := range strings.Lines(p.logs.String()) {
		if strings.Contains(line, "broker not answering") {
			warn = line
			break
		}
	}
	want := []string{"level=WARN", "probe_error="}
	if len(p.brokers) > 0 {
		want = append(want, p.brokers[0])
	}
	for _, w := range want {
		if !strings.Contains(warn, w) {
			t.Errorf("%s: the WARN line lacks %q: %q", p.name, w, warn)
		}
	}
	cfg := relay.DefaultConfig()
	cfg.DatabaseURL, cfg.Slot = p.dbURL, p.slot
	st, err := ops.ReadStatus(context.Background(), cfg, ops.StatusLimits{RelayURL: p.url(), RelayRequired: true})
	if err != nil {
		t.Fatal(err)
	}
	if !hasProblem(st, ops.CheckRelayNotReady, "broker not answering") {
		t.Errorf("%s: status does not report the broker: %+v", p.name, st.Problems)
	}
	if code := ops.StatusExitCode(st.Problems); code != 6 {
		t.Errorf("%s: walrelay status would exit %d, want 6 (relay not ready)", p.name, code)
	}
}

// expectBack waits for walrelay_broker_up 1 within the same bound of now, the
// recovery's log line, and /readyz answering status with want.
func (p *probed) expectBack(t *testing.T, status int, want string) {
	t.Helper()
	back := time.Now()
	if !pollUntil(probeAckTimeout+probeInterval+30*time.Second, func() bool { return gaugeValue(t, p.reg, "walrelay_broker_up") == 1 }) {
		t.Fatalf("%s: walrelay_broker_up still 0 %s after the broker returned", p.name, time.Since(back).Round(time.Millisecond))
	}
	t.Logf("%s: return seen after %s", p.name, time.Since(back).Round(time.Millisecond))
	if !p.waitLog(10*time.Second, "broker answering again") {
		t.Errorf("%s: the broker's return was not logged", p.name)
	}
	waitHTTP(t, p.url()+"/readyz", status, want)
}

// deliverOne writes one event and waits until a consumer reads it from the broker.
func deliverOne(t *testing.T, conn *pgx.Conn, brokerAddrs []string, eventType string) {
	t.Helper()
	written := testenv.WriteTx(t, conn, []string{"probe-" + eventType}, eventType, 1, false)
	consumer := testenv.NewConsumer(t, brokerAddrs, `outbox\.event\..*`)
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(written[0].ID) > 0 }) {
		t.Fatalf("event %s (%s) not delivered", written[0].ID, eventType)
	}
}

// restartableKafka is a one-broker kfake that keeps its data in a directory of the
// test's, so that it can be closed (its port then refuses connections) and started
// again on the same port with the same topics and producer state.
type restartableKafka struct {
	t    *testing.T
	dir  string
	port int
	mu   sync.Mutex
	c    *kfake.Cluster
}

func newRestartableKafka(t *testing.T) *restartableKafka {
	t.Helper()
	k := &restartableKafka{t: t, dir: t.TempDir()}
	k.c = testenv.Kafka(t, kfake.DataDir(k.dir))
	_, port, err := net.SplitHostPort(k.c.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	if k.port, err = strconv.Atoi(port); err != nil {
		t.Fatal(err)
	}
	return k
}

func (k *restartableKafka) addrs() []string {
	return []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(k.port))}
}

func (k *restartableKafka) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.c.Close()
}

func (k *restartableKafka) restart() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.c = testenv.Kafka(k.t, kfake.DataDir(k.dir), kfake.Ports(k.port))
}
