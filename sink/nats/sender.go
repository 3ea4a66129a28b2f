package nats

import (
	"container/heap"
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// run is the sender: the one goroutine that hands messages to the client, in
// publish order, with events sent again (after an outage, a timeout, no
// responders) going out before newer ones. It waits while disconnected, so
// nothing newer slips ahead of the events the outage interrupted.
func (s *Sink) run(ctx context.Context) {
	defer close(s.stopped)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		p, wait := s.next()
		if p != nil {
			s.send(ctx, p)
			continue
		}
		var due <-chan time.Time
		if wait > 0 {
			timer.Reset(wait)
			due = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-s.connected:
		case <-due:
		}
		timer.Stop()
	}
}

// next takes the event to send now, or says how long to wait for one (0: until
// woken).
func (s *Sink) next() (*pending, time.Duration) {
	connected := s.nc.IsConnected()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.mu.queue) == 0 {
		return nil, 0
	}
	if !connected {
		return nil, time.Second // a CONNECTED event wakes the sender; this is a fallback
	}
	head := s.mu.queue[0]
	if d := time.Until(head.notBefore); d > 0 {
		return nil, d
	}
	heap.Pop(&s.mu.queue)
	return head, 0
}

// send makes one attempt at p.
func (s *Sink) send(ctx context.Context, p *pending) {
	if p.err != nil {
		s.fail(p, p.err)
		return
	}
	if p.lookup {
		p.lookup = false
		if err := s.resolve(ctx, p.msg.Subject); err != nil {
			if ctx.Err() != nil {
				s.requeue(p, 0) // closing: Close fails it
				return
			}
			s.fail(p, err)
			return
		}
	}
	if !s.track(p) {
		return
	}
	// The ack or error callback may run before PublishMsgAsync returns; p is in
	// inflight already. A synchronous error means no callback comes.
	if _, err := s.js.PublishMsgAsync(p.msg, jetstream.WithStallWait(stallWait)); err != nil {
		if s.untrack(p.msg) == p {
			s.fail(p, err)
		}
	}
}

// track records p as sent; false when the sink is closed (p is finished then).
func (s *Sink) track(p *pending) bool {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		s.finish(p, errClosed)
		return false
	}
	if p.sent == 0 {
		p.sent = time.Now().UnixNano()
	}
	s.mu.inflight[p.msg] = p
	s.mu.Unlock()
	return true
}

// untrack takes the event sent as m back; nil when its outcome was taken already.
func (s *Sink) untrack(m *nats.Msg) *pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.mu.inflight[m]
	delete(s.mu.inflight, m)
	return p
}

// requeue hands p back to the sender, to be sent after d.
func (s *Sink) requeue(p *pending, d time.Duration) {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		s.finish(p, errClosed)
		return
	}
	p.notBefore = time.Time{}
	if d > 0 {
		p.notBefore = time.Now().Add(d)
	}
	s.mu.queue.push(p)
	s.mu.Unlock()
	s.signal()
}

func (s *Sink) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// queue holds events waiting to be sent, as a heap ordered by publish sequence.
type queue []*pending

func (q *queue) push(p *pending) { heap.Push(q, p) }

func (q queue) Len() int           { return len(q) }
func (q queue) Less(i, j int) bool { return q[i].seq < q[j].seq }
func (q queue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)        { *q = append(*q, x.(*pending)) }
func (q *queue) Pop() any {
	old := *q
	p := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return p
}
