package procs_test

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/procs"
)

// waitProcs waits until GOMAXPROCS is want, or fails after within.
func waitProcs(t *testing.T, want int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for runtime.GOMAXPROCS(0) != want {
		if time.Now().After(deadline) {
			t.Fatalf("GOMAXPROCS is %d after %s, want %d", runtime.GOMAXPROCS(0), within, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The process starts on one processor, gets the default while a goroutine keeps a
// core busy, goes back to one once it stops, and has the default again when Adapt
// returns.
func TestAdaptFollowsTheLoad(t *testing.T) {
	wide := runtime.GOMAXPROCS(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	// Thresholds low enough that a spinning goroutine crosses Up even when other
	// processes keep the machine's cores busy, and an idle test process stays under
	// Down.
	policy := procs.Policy{Every: 50 * time.Millisecond, Up: 0.25, Down: 0.1, Calm: 4}
	go func() {
		defer close(done)
		procs.Adapt(ctx, policy, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	defer func() { cancel(); <-done }()
	if wide < 2 {
		<-time.After(3 * policy.Every)
		if got := runtime.GOMAXPROCS(0); got != wide {
			t.Fatalf("with a default of %d processor, Adapt set %d", wide, got)
		}
		return
	}
	waitProcs(t, 1, 5*time.Second)

	var stop atomic.Bool
	spun := make(chan struct{})
	go func() {
		defer close(spun)
		for !stop.Load() {
		}
	}()
	waitProcs(t, wide, 15*time.Second)
	stop.Store(true)
	<-spun
	waitProcs(t, 1, 15*time.Second)

	cancel()
	<-done
	if got := runtime.GOMAXPROCS(0); got != wide {
		t.Fatalf("GOMAXPROCS is %d after Adapt returned, want the default %d", got, wide)
	}
}
