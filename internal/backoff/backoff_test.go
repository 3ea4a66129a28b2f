package backoff_test

import (
	"context"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/backoff"
)

func TestDoublesWithinJitterUpToMax(t *testing.T) {
	b := backoff.New(100*time.Millisecond, time.Second)
	for _, base := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		base *= time.Millisecond
		if base > time.Second {
			base = time.Second
		}
		got := b.Next()
		if got < base*8/10 || got > base*12/10 {
			t.Fatalf("wait %s outside ±20%% of %s", got, base)
		}
	}
	b.Reset()
	if got := b.Next(); got > 120*time.Millisecond {
		t.Fatalf("after Reset: %s, want about 100ms", got)
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if backoff.Sleep(ctx, time.Hour) {
		t.Fatal("Sleep waited out an hour on an ended context")
	}
	if !backoff.Sleep(context.Background(), time.Millisecond) {
		t.Fatal("Sleep did not report a full wait")
	}
}
