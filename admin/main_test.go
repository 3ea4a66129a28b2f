package admin_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/walrelay/walrelay/admin"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/sink/sinks"
)

// The helpers below are the few of package relay's tests that the admin API's
// tests need: a relay on a migrated database of the test's own and kfake, served
// as walrelay run serves it.

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

type logBuffer = testenv.LogBuffer

var (
	waitFor  = testenv.WaitFor
	freeAddr = testenv.FreeAddr
)

// running is a relay under test, served on its listener.
type running struct {
	t      *testing.T
	cancel context.CancelFunc
	done   chan error
	logs   *logBuffer
	relay  *relay.Relay
}

// outboxWithBroker is a migrated database of the test's own, a broker and a
// connection to the database.
func outboxWithBroker(t *testing.T) (dbURL string, broker *kfake.Cluster, conn *pgx.Conn) {
	t.Helper()
	dbURL = testenv.MigratedDatabase(t)
	return dbURL, testenv.Kafka(t), testenv.Connect(t, dbURL)
}

// config is a test relay's configuration, its broker's and its listener's.
type config struct {
	relay.Config
	MetricsAddr string
	AdminToken  string
	AdminHosts  []string
	Pprof       bool
	// TrustedProxies is admin.Options.TrustedProxies.
	TrustedProxies []string
}

// start runs a relay for dbURL and the broker, served with admin.Serve, until the
// test ends.
func start(t *testing.T, dbURL string, broker *kfake.Cluster, slot string, tweak ...func(*config)) *running {
	t.Helper()
	logs := &logBuffer{}
	cfg := config{Config: relay.DefaultConfig()}
	cfg.DatabaseURL, cfg.Slot = dbURL, slot
	cfg.ReconnectMin, cfg.ReconnectMax = 100*time.Millisecond, time.Second
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for _, f := range tweak {
		f(&cfg)
	}
	sc := sinks.DefaultConfig()
	sc.Kafka.Brokers = broker.ListenAddrs()
	// What settings.CheckedConfig sets from the sink's settings.
	cfg.BrokerAddrs = sc.Addresses()
	cfg.Published = relay.Published{Sink: string(sc.Kind), TopicTemplate: sc.TopicTemplate, Format: sc.Format}
	snk, err := sinks.Open(context.Background(), sc, sinks.Window{Events: cfg.MaxInFlightEvents,
		Bytes: cfg.MaxInFlightBytes, PollBatch: cfg.PollInFlight()}, cfg.Logger, cfg.ReconnectMin, cfg.ReconnectMax)
	if err != nil {
		t.Fatalf("open the sink: %v", err)
	}
	t.Cleanup(snk.Close)
	cfg.Sink = snk
	r, err := relay.New(cfg.Config)
	if err != nil {
		t.Fatalf("relay.New: %v", err)
	}
	opts := admin.Options{Addr: cfg.MetricsAddr, Token: cfg.AdminToken, Hosts: cfg.AdminHosts, Pprof: cfg.Pprof,
		TrustedProxies: cfg.TrustedProxies}
	ctx, cancel := context.WithCancel(context.Background())
	rn := &running{t: t, cancel: cancel, done: make(chan error, 1), logs: logs, relay: r}
	go func() {
		served := make(chan error, 1)
		go func() { served <- admin.Serve(ctx, r, opts) }()
		err := r.Run(ctx)
		cancel()
		rn.done <- errors.Join(err, <-served)
	}()
	t.Cleanup(func() {
		rn.cancel()
		select {
		case err := <-rn.done:
			if err != nil {
				t.Errorf("relay.Run or admin.Serve returned %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("relay did not stop within 30s")
		}
		if t.Failed() {
			t.Logf("relay logs:\n%s", logs.String())
		}
	})
	return rn
}

// waitLog waits until the relay logged a line containing substr.
func (rn *running) waitLog(timeout time.Duration, substr string) bool {
	return testenv.Eventually(timeout, func() bool { return strings.Contains(rn.logs.String(), substr) })
}

func aggregates(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + "-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
	}
	return out
}

// waitHTTP waits until url answers status with a body containing want, and returns
// the body.
func waitHTTP(t *testing.T, url string, status int, want string) string {
	t.Helper()
	var last string
	ok := testenv.Eventually(30*time.Second, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			last = err.Error()
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		last = fmt.Sprintf("%d %s", resp.StatusCode, b)
		return resp.StatusCode == status && strings.Contains(string(b), want)
	})
	if !ok {
		t.Fatalf("%s: want %d with %q, last answer: %.300s", url, status, want, last)
	}
	return last
}
