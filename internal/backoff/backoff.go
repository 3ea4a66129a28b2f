// Package backoff is the one retry delay of walrelay's loops: capped exponential,
// with one jitter rule, so that several relays (or clients) do not retry in step.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff doubles its delay from Min up to Max. Its zero value waits Min = 0; build
// it with New.
type Backoff struct {
	min, max, next time.Duration
}

// New returns a backoff whose first delay is min and whose delays never exceed max.
func New(min, max time.Duration) *Backoff { return &Backoff{min: min, max: max, next: min} }

// Next returns the wait before the next attempt, the current delay spread by ±20%,
// and doubles the delay for the attempt after.
func (b *Backoff) Next() time.Duration {
	d := b.next
	b.next = min(2*b.next, b.max)
	return Jitter(d)
}

// Reset starts again from the first delay, after an attempt that worked.
func (b *Backoff) Reset() { b.next = b.min }

// Jitter spreads d by up to ±20%.
func Jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// Sleep waits d, or until ctx ends; it reports whether the full wait passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
