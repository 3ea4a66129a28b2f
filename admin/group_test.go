package admin_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/admin"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/sink/sinks"
)

// A group of two databases serves one listener: /metrics labels each database's
// series, /readyz answers for all or one, and the admin API needs ?database=NAME
// (400 without, 404 for a name it does not run) and acts on that database alone,
// behind the token before anything else.
func TestGroupAddressesEachDatabase(t *testing.T) {
	t.Parallel()
	broker := testenv.Kafka(t)
	logs := &logBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var dbs []relay.Database
	for _, name := range []string{"alpha", "beta"} {
		cfg := relay.DefaultConfig()
		cfg.DatabaseURL, cfg.Slot, cfg.Logger = testenv.MigratedDatabase(t), "group_"+name, logger.With("database", name)
		cfg.ReconnectMin, cfg.ReconnectMax = 100*time.Millisecond, time.Second
		sc := sinks.DefaultConfig()
		sc.Kafka.Brokers = broker.ListenAddrs()
		snk, err := sinks.Open(context.Background(), sc, sinks.Window{Events: cfg.MaxInFlightEvents, Bytes: cfg.MaxInFlightBytes,
			PollBatch: cfg.PollInFlight()}, cfg.Logger, cfg.ReconnectMin, cfg.ReconnectMax)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(snk.Close)
		cfg.Sink = snk
		dbs = append(dbs, relay.Database{Name: name, Config: cfg})
	}
	addr := freeAddr(t)
	const token = "group-token"
	g, err := relay.NewGroup(relay.GroupConfig{Logger: logger}, dbs)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, served := make(chan error, 1), make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	go func() { served <- admin.ServeGroup(ctx, g, admin.Options{Addr: addr, Token: token, Pprof: true}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("group Run: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("admin.ServeGroup: %v", err)
		}
		if t.Failed() {
			t.Logf("logs:\n%s", logs.String())
		}
	})
	base := "http://" + addr
	testenv.WaitFor(t, 30*time.Second, "both databases to stream", func() bool {
		resp, err := http.Get(base + "/readyz") // refused until ServeGroup listens
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(body), "alpha: streaming") && strings.Contains(string(body), "beta: streaming")
	})

	if code, _ := adminCall(t, "POST", base+"/pause", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("POST /pause without the token: %d, want 401", code)
	}
	// The group's listener has the single relay's guard: web pages and other Hosts
	// are refused whatever the token, and the profiler asks for the token.
	if code, body := guardCall(t, "POST", base+"/pause?database=alpha", token, "", map[string]string{"Origin": "http://evil.example"}); code != http.StatusForbidden {
		t.Fatalf("cross-site POST /pause?database=alpha: %d %s, want 403", code, body)
	}
	if code, body := guardCall(t, "GET", base+"/status?database=beta", token, "", map[string]string{"Host": "evil.example"}); code != http.StatusForbidden {
		t.Fatalf("GET /status?database=beta to Host evil.example: %d %s, want 403", code, body)
	}
	if code, body := guardCall(t, "GET", base+"/debug/pprof/", "", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("GET /debug/pprof/ without the token: %d %s, want 401", code, body)
	}
	if code, body := guardCall(t, "GET", base+"/debug/pprof/", token, "", nil); code != http.StatusOK {
		t.Fatalf("GET /debug/pprof/ with the token: %d %s, want 200", code, body)
	}
	if code, body := adminCall(t, "POST", base+"/pause", token, ""); code != http.StatusBadRequest || !strings.Contains(string(body), "alpha, beta") {
		t.Fatalf("POST /pause without ?database: %d %s, want 400 naming the databases", code, body)
	}
	if code, _ := adminCall(t, "POST", base+"/pause?database=gamma", token, ""); code != http.StatusNotFound {
		t.Fatalf("POST /pause?database=gamma: %d, want 404", code)
	}
	if code, body := adminCall(t, "POST", base+"/pause?database=alpha", token, ""); code != http.StatusOK || !strings.Contains(string(body), `"changed": true`) {
		t.Fatalf("POST /pause?database=alpha: %d %s", code, body)
	}
	if code, body := adminCall(t, "GET", base+"/readyz?database=alpha", "", ""); code != http.StatusServiceUnavailable || !strings.HasPrefix(string(body), "paused") {
		t.Fatalf("/readyz?database=alpha after its pause: %d %q, want 503 paused", code, body)
	}
	if code, body := adminCall(t, "GET", base+"/readyz?database=beta", "", ""); code != http.StatusOK {
		t.Fatalf("/readyz?database=beta, not paused: %d %q, want 200", code, body)
	}
	if code, body := adminCall(t, "GET", base+"/readyz", "", ""); code != http.StatusServiceUnavailable || !strings.Contains(string(body), "alpha: paused") {
		t.Fatalf("/readyz with alpha paused: %d %q, want 503 naming alpha", code, body)
	}
	if code, body := adminCall(t, "GET", base+"/status?database=beta", token, ""); code != http.StatusOK || !strings.Contains(string(body), `"slot": "group_beta"`) {
		t.Fatalf("GET /status?database=beta: %d %s, want beta's slot", code, body)
	}
	// The console's view of a group: its databases, and each one's overview by name.
	if code, body := adminCall(t, "GET", base+"/databases", token, ""); code != http.StatusOK || !strings.Contains(string(body), `"alpha",`) ||
		!strings.Contains(string(body), `"beta"`) {
		t.Fatalf("GET /databases: %d %s, want alpha and beta", code, body)
	}
	if code, body := adminCall(t, "GET", base+"/overview?database=alpha", token, ""); code != http.StatusOK ||
		!strings.Contains(string(body), `"database": "alpha"`) || !strings.Contains(string(body), `"state": "paused"`) {
		t.Fatalf("GET /overview?database=alpha: %d %s, want alpha paused", code, body)
	}
	if code, body := adminCall(t, "GET", base+"/overview?database=beta", token, ""); code != http.StatusOK || !strings.Contains(string(body), `"state": "streaming"`) {
		t.Fatalf("GET /overview?database=beta: %d %s, want beta streaming", code, body)
	}
	if code, _ := adminCall(t, "GET", base+"/overview", token, ""); code != http.StatusBadRequest {
		t.Fatalf("GET /overview without ?database in a group: %d, want 400", code)
	}
	_, metrics := adminCall(t, "GET", base+"/metrics", "", "")
	for _, want := range []string{`walrelay_paused{database="alpha"} 1`, `walrelay_paused{database="beta"} 0`, `walrelay_leader{database="beta"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
