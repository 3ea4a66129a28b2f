// Package drain counts work handed off and not yet finished (events a sink still
// owes an outcome for, outcomes the bookkeeper has not written), so that a flush can
// wait for none.
package drain

import (
	"context"
	"sync"
)

// Count is guarded by its owner's lock, because the owner reads it together with
// other state (backpressure, connection state). The zero value is ready to use.
type Count struct {
	n    int
	idle chan struct{} // closed when n drops to 0; nil while nobody waits
}

// Add changes the count by d; the owner's lock is held.
func (c *Count) Add(d int) {
	c.n += d
	if c.n == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
}

// N is the count; the owner's lock is held.
func (c *Count) N() int { return c.n }

// Wait returns once the count is 0, or ctx ends, with how many are left. mu is the
// owner's lock, not held by the caller.
func (c *Count) Wait(ctx context.Context, mu sync.Locker) (left int, err error) {
	mu.Lock()
	if c.n == 0 {
		mu.Unlock()
		return 0, nil
	}
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	idle := c.idle
	mu.Unlock()
	select {
	case <-idle:
		return 0, nil
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		return c.n, ctx.Err()
	}
}
