package relay

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
)

// ackClock measures how long the broker has kept events without answering: every
// event handed to the sink, by the stream or the poller, is counted in the epoch it
// was sent in until the sink calls its Done. The oldest epoch with events still
// unanswered dates the oldest unacknowledged event to within one epoch, at the cost
// of two atomic additions per event and no allocation (docs/design.md invariant 11).
type ackClock struct {
	cur atomic.Pointer[ackEpoch]
	mu  struct {
		sync.Mutex
		epochs []*ackEpoch // oldest first; the last is cur
	}
	acked   atomic.Int64          // events the broker acknowledged, ever
	lastErr atomic.Pointer[error] // the last error a publish ended with
}

// ackEpoch counts the events sent since start and not answered yet.
type ackEpoch struct {
	start   time.Time
	pending atomic.Int64
}

func newAckClock(now time.Time) *ackClock {
	c := &ackClock{}
	e := &ackEpoch{start: now}
	c.cur.Store(e)
	c.mu.epochs = []*ackEpoch{e}
	return c
}

// sent counts an event handed to the sink; the epoch returned goes to answered.
func (c *ackClock) sent() *ackEpoch {
	e := c.cur.Load()
	e.pending.Add(1)
	return e
}

// answered takes the sink's verdict on an event sent in e. It never blocks.
func (c *ackClock) answered(e *ackEpoch, err error) {
	e.pending.Add(-1)
	if err == nil {
		c.acked.Add(1)
		return
	}
	last := err // err itself would escape, costing every answer an allocation
	c.lastErr.Store(&last)
}

// lastError is the last error a publish ended with, or nil.
func (c *ackClock) lastError() error {
	if p := c.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// rotate starts a new epoch at now and forgets the old ones that are answered. The
// epoch rotated out last is kept once more: a sender may have loaded it just before.
func (c *ackClock) rotate(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := &ackEpoch{start: now}
	c.cur.Store(e)
	epochs := c.mu.epochs
	drop := 0
	for drop < len(epochs)-1 && epochs[drop].pending.Load() == 0 {
		drop++
	}
	c.mu.epochs = append(epochs[drop:], e)
}

// oldest returns the age at now of the oldest event not answered yet (0: none) and
// how many are unanswered.
func (c *ackClock) oldest(now time.Time) (age time.Duration, events int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.mu.epochs {
		n := e.pending.Load()
		if n > 0 && age == 0 {
			age = now.Sub(e.start)
		}
		events += n
	}
	return age, events
}

// clockedSink is a sink whose events the ack clock times: the poller's, whose
// events carry no state of the relay's to hold the epoch.
type clockedSink struct {
	sink.Sink
	acks *ackClock
}

func (s clockedSink) Publish(ev *outbox.Event, done sink.Done) {
	sent := s.acks.sent()
	s.Sink.Publish(ev, sink.DoneFunc(func(err error) {
		s.acks.answered(sent, err)
		done.Done(err)
	}))
}
