package relay_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/ops"
	"github.com/walrelay/walrelay/relay"
)

// A broker that stops acknowledging under load is an incident within the ack
// timeout: a WARN line naming the brokers, /readyz 503 naming them, walrelay_broker_up
// 0 and a status problem; once it acknowledges again every event is delivered, the
// recovery is logged and /readyz is 200 again.
func TestBrokerThatStopsAcknowledging(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	reg := prometheus.NewRegistry()
	addr := freeAddr(t)
	const ackTimeout = time.Second
	rn := start(t, dbURL, broker, "noack", func(c *config) {
		c.Registry, c.MetricsAddr = reg, addr
		c.AckTimeout = ackTimeout
		c.BrokerAddrs = broker.ListenAddrs()
	})
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	aggs := aggregates("na", 8)
	written := testenv.WriteTx(t, conn, aggs, "before", 100, false)
	if !consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("delivered %d of %d before the fault", consumer.Distinct(), len(written))
	}
	waitHTTP(t, "http://"+addr+"/readyz", http.StatusOK, "streaming")
	if got := testutil.ToFloat64(gauge(t, reg, "walrelay_broker_up")); got != 1 {
		t.Fatalf("walrelay_broker_up = %v while the broker acknowledges, want 1", got)
	}

	fault := broker.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotEnoughReplicas, Count: -1})
	faultAt := time.Now()
	for i := range 5 {
		written = append(written, testenv.WriteTx(t, conn, aggs, "during."+string(rune('a'+i)), 100, false)...)
	}
	if !rn.waitLog(30*time.Second, "broker not acknowledging") {
		t.Fatal("no WARN line while the broker does not acknowledge")
	}
	noticed := time.Since(faultAt)
	t.Logf("noticed %s after the broker stopped acknowledging (ack timeout %s)", noticed.Round(time.Millisecond), ackTimeout)
	if noticed > ackTimeout+10*time.Second {
		t.Errorf("noticed after %s, want about the ack timeout (%s)", noticed, ackTimeout)
	}
	var warn string
	for line := range strings.Lines(rn.logs.String()) {
		if strings.Contains(line, "broker not acknowledging") {
			warn = line
			break
		}
	}
	for _, want := range []string{"level=WARN", broker.ListenAddrs()[0], "inflight_events=", "oldest_inflight_seconds="} {
		if !strings.Contains(warn, want) {
			t.Errorf("the WARN line lacks %q: %s", want, warn)
		}
	}
	waitHTTP(t, "http://"+addr+"/readyz", http.StatusServiceUnavailable, "broker not acknowledging")
	body := waitHTTP(t, "http://"+addr+"/readyz", http.StatusServiceUnavailable, broker.ListenAddrs()[0])
	t.Logf("/readyz: %s", body)
	if got := testutil.ToFloat64(gauge(t, reg, "walrelay_broker_up")); got != 0 {
		t.Errorf("walrelay_broker_up = %v while the broker does not acknowledge, want 0", got)
	}
	if got := testutil.ToFloat64(gauge(t, reg, "walrelay_oldest_inflight_age_seconds")); got < ackTimeout.Seconds() {
		t.Errorf("walrelay_oldest_inflight_age_seconds = %v, want at least %v", got, ackTimeout.Seconds())
	}
	statusCfg := relay.DefaultConfig()
	statusCfg.DatabaseURL, statusCfg.Slot = dbURL, "noack"
	st, err := ops.ReadStatus(context.Background(), statusCfg, ops.StatusLimits{RelayURL: "http://" + addr, RelayRequired: true})
	if err != nil {
		t.Fatal(err)
	}
	if !hasProblem(st, ops.CheckRelayNotReady, "broker not acknowledging") {
		t.Errorf("status does not report the broker: %+v", st.Problems)
	}

	fault.Remove()
	if !consumer.WaitDistinct(2*time.Minute, len(written)) {
		t.Fatalf("delivered %d of %d once the broker acknowledged again", consumer.Distinct(), len(written))
	}
	if !rn.waitLog(30*time.Second, "broker back after") {
		t.Error("the recovery was not logged")
	}
	waitHTTP(t, "http://"+addr+"/readyz", http.StatusOK, "streaming")
	if got := testutil.ToFloat64(gauge(t, reg, "walrelay_broker_up")); got != 1 {
		t.Errorf("walrelay_broker_up = %v after the recovery, want 1", got)
	}
	for _, ev := range written {
		if consumer.Count(ev.ID) == 0 {
			t.Errorf("event %s (%s) lost", ev.ID, ev.EventType)
		}
	}
}

func hasProblem(st *ops.Status, check ops.Check, substr string) bool {
	for _, p := range st.Problems {
		if p.Check == check && strings.Contains(p.Message, substr) {
			return true
		}
	}
	return false
}

// A broker that drops the producer's connections is seen the same way, and the WARN
// line carries the producer's last error.
func TestBrokerDroppingConnectionsIsNamed(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	addr := freeAddr(t)
	rn := start(t, dbURL, broker, "noconn", func(c *config) {
		c.MetricsAddr = addr
		c.AckTimeout = time.Second
		c.BrokerAddrs = broker.ListenAddrs()
	})
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	written := testenv.WriteTx(t, conn, []string{"c1"}, "before", 10, false)
	if !consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("delivered %d of %d before the fault", consumer.Distinct(), len(written))
	}
	var down atomic.Bool
	down.Store(true)
	broker.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		broker.KeepControl()
		if down.Load() {
			return nil, errors.New("broker stopped"), true // closes the connection
		}
		return nil, nil, false
	})
	written = append(written, testenv.WriteTx(t, conn, []string{"c1", "c2"}, "during", 50, false)...)
	body := waitHTTP(t, "http://"+addr+"/readyz", http.StatusServiceUnavailable, "last error:")
	t.Logf("/readyz: %s", body)
	if !rn.waitLog(10*time.Second, "last_error=") {
		t.Error("the WARN line does not carry the producer's last error")
	}
	down.Store(false)
	if !consumer.WaitDistinct(2*time.Minute, len(written)) {
		t.Fatalf("delivered %d of %d once the broker answered again", consumer.Distinct(), len(written))
	}
	if !rn.waitLog(30*time.Second, "broker back after") {
		t.Error("the recovery was not logged")
	}
	waitHTTP(t, "http://"+addr+"/readyz", http.StatusOK, "streaming")
}
