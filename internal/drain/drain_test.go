package drain_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/walrelay/walrelay/internal/drain"
)

func TestWait(t *testing.T) {
	var mu sync.Mutex
	var c drain.Count
	if left, err := c.Wait(context.Background(), &mu); left != 0 || err != nil {
		t.Fatalf("idle count: Wait = %d, %v", left, err)
	}
	mu.Lock()
	c.Add(2)
	mu.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if left, err := c.Wait(ctx, &mu); left != 2 || !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled wait: %d, %v; want 2 left and context.Canceled", left, err)
	}

	done := make(chan error)
	go func() {
		_, err := c.Wait(context.Background(), &mu)
		done <- err
	}()
	for range 2 {
		mu.Lock()
		c.Add(-1)
		mu.Unlock()
	}
	if err := <-done; err != nil {
		t.Fatalf("Wait after the count reached 0: %v", err)
	}
}
