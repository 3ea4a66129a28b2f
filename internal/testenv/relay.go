package testenv

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/sink"
)

// RunRelay runs a relay streaming dbURL into snk, with fast reconnects and debug
// logs into logs (then tweaks, when given), until the returned stop is called or
// the test ends. stop fails the test when Run returns an error; the logs are printed
// when the test failed. Register the sink's Close before calling it, so that the
// relay stops first.
func RunRelay(t testing.TB, dbURL, slot string, snk sink.Sink, logs *LogBuffer, tweaks ...func(*relay.Config)) (stop func()) {
	t.Helper()
	cfg := relay.DefaultConfig()
	cfg.DatabaseURL = dbURL
	cfg.Slot = slot
	cfg.Sink = snk
	cfg.ReconnectMin, cfg.ReconnectMax = 100*time.Millisecond, time.Second
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for _, tweak := range tweaks {
		tweak(&cfg)
	}
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatalf("relay.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("relay.Run returned %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("relay did not stop within 30s")
			}
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("relay logs:\n%s", logs.String())
		}
	})
	return stop
}
