package relay

import (
	"errors"
	"testing"
	"time"
)

func TestAckClockDatesTheOldestUnansweredEvent(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := newAckClock(t0)
	first := c.sent()
	c.rotate(t0.Add(time.Second))
	second := c.sent()
	c.rotate(t0.Add(2 * time.Second))
	if age, n := c.oldest(t0.Add(3 * time.Second)); age != 3*time.Second || n != 2 {
		t.Fatalf("two unanswered: oldest %s, %d events; want 3s, 2", age, n)
	}
	c.answered(first, nil)
	if age, n := c.oldest(t0.Add(3 * time.Second)); age != 2*time.Second || n != 1 {
		t.Fatalf("first acked: oldest %s, %d events; want 2s, 1", age, n)
	}
	boom := errors.New("boom")
	c.answered(second, boom)
	for i := range 3 {
		c.rotate(t0.Add(time.Duration(3+i) * time.Second))
	}
	if age, n := c.oldest(t0.Add(6 * time.Second)); age != 0 || n != 0 {
		t.Fatalf("all answered: oldest %s, %d events; want 0, 0", age, n)
	}
	if c.acked.Load() != 1 || !errors.Is(c.lastError(), boom) {
		t.Fatalf("acked %d, last error %v; want 1, boom", c.acked.Load(), c.lastError())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.mu.epochs) > 2 {
		t.Errorf("answered epochs kept: %d", len(c.mu.epochs))
	}
}

// BenchmarkAckClock is the clock's cost per event, sent and answered from many
// goroutines at once as broker callbacks are.
func BenchmarkAckClock(b *testing.B) {
	c := newAckClock(time.Now())
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.answered(c.sent(), nil)
		}
	})
}
