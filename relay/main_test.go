package relay_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/walrelay/walrelay/admin"
	"github.com/walrelay/walrelay/internal/pgcluster"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/migrations"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/sink/sinks"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// logBuffer collects logs; printed when a test fails.
type logBuffer = testenv.LogBuffer

// running is a relay under test.
type running struct {
	t      *testing.T
	cancel context.CancelFunc
	done   chan error
	logs   *logBuffer
	relay  *relay.Relay
}

// outboxWithBroker is a migrated database of the test's own, a broker and a
// connection to the database: most tests' first three lines.
func outboxWithBroker(t *testing.T) (dbURL string, broker *kfake.Cluster, conn *pgx.Conn) {
	t.Helper()
	dbURL = testenv.MigratedDatabase(t)
	return dbURL, testenv.Kafka(t), testenv.Connect(t, dbURL)
}

// start runs a relay for dbURL and the broker until the test stops it.
func start(t *testing.T, dbURL string, broker *kfake.Cluster, slot string, tweak ...func(*config)) *running {
	t.Helper()
	return startWithBrokers(t, dbURL, broker.ListenAddrs(), slot, tweak...)
}

// config is a test relay's configuration with its broker's beside it: tweaks set
// either, and the sink is built from Sinks. MetricsAddr, when set, serves the relay
// there (admin.Serve), as walrelay run does.
type config struct {
	relay.Config
	Sinks       sinks.Config
	MetricsAddr string
}

func startWithBrokers(t *testing.T, dbURL string, brokers []string, slot string, tweak ...func(*config)) *running {
	t.Helper()
	logs := &logBuffer{}
	cfg := config{Config: relay.DefaultConfig(), Sinks: sinks.DefaultConfig()}
	cfg.DatabaseURL = dbURL
	cfg.Sinks.Kafka.Brokers = brokers
	cfg.Slot = slot
	cfg.ReconnectMin = 100 * time.Millisecond
	cfg.ReconnectMax = time.Second
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for _, f := range tweak {
		f(&cfg)
	}
	if cfg.Sink == nil { // a tweak may bring a sink of its own
		snk, err := sinks.Open(context.Background(), cfg.Sinks, sinks.Window{Events: cfg.MaxInFlightEvents,
			Bytes: cfg.MaxInFlightBytes, PollBatch: cfg.PollInFlight()}, cfg.Logger, cfg.ReconnectMin, cfg.ReconnectMax)
		if err != nil {
			t.Fatalf("open the %s sink: %v", cfg.Sinks.Kind, err)
		}
		t.Cleanup(snk.Close) // after the relay stopped: cleanups run last first
		cfg.Sink = snk
	}
	r, err := relay.New(cfg.Config)
	if err != nil {
		t.Fatalf("relay.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rn := &running{t: t, cancel: cancel, done: make(chan error, 1), logs: logs, relay: r}
	go func() { rn.done <- runServed(ctx, r, admin.Options{Addr: cfg.MetricsAddr}) }()
	t.Cleanup(func() {
		rn.stop()
		if t.Failed() {
			t.Logf("relay logs:\n%s", logs.String())
		}
	})
	return rn
}

// runServed runs r and serves it with opts until ctx ends, as walrelay run does:
// Run's error, else Serve's.
func runServed(ctx context.Context, r *relay.Relay, opts admin.Options) error {
	ctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		err := admin.Serve(ctx, r, opts)
		if err != nil {
			cancel()
		}
		served <- err
	}()
	err := r.Run(ctx)
	cancel()
	return errors.Join(err, <-served)
}

// stop cancels the relay and waits for Run; it fails the test when Run errs.
func (rn *running) stop() {
	rn.t.Helper()
	rn.cancel()
	select {
	case err, ok := <-rn.done:
		if ok && err != nil {
			rn.t.Errorf("relay.Run returned %v", err)
		}
		if ok {
			close(rn.done)
		}
	case <-time.After(30 * time.Second):
		rn.t.Errorf("relay did not stop within 30s")
	}
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

// ownCluster starts a migrated PostgreSQL cluster for the test alone, from binDir
// ("": the default binaries) with settings, and returns it and its URL: for tests
// that restart or fail the server, tune it, or must not see other tests' WAL.
func ownCluster(t testing.TB, binDir string, settings map[string]string) (*pgcluster.Cluster, string) {
	t.Helper()
	if binDir == "" {
		var err error
		if binDir, err = pgcluster.BinDir(); err != nil {
			needBinaries(t, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	all := map[string]string{"synchronous_commit": "on"}
	maps.Copy(all, settings)
	pg, err := pgcluster.Start(ctx, pgcluster.Options{BinDir: binDir, Settings: all})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	dbURL := pg.URL("postgres")
	if _, err := migrations.Up(ctx, dbURL, nil); err != nil {
		t.Fatal(err)
	}
	return pg, dbURL
}

// needBinaries fails the test under CI, and skips it elsewhere, for want of server
// binaries.
func needBinaries(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal("CI is set, but this test needs local PostgreSQL binaries for clusters of its own: " + err.Error())
	}
	t.Skip("needs local PostgreSQL binaries for clusters of its own: " + err.Error())
}
