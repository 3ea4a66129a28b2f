package replication

import (
	"context"
	"sync"
	"time"
)

// Pause holds a stream at a message boundary: while paused the stream reads nothing
// and hands nothing on, and keeps sending standby status updates, so the server's
// wal_sender_timeout never ends the session. Resuming reads on from the very next
// message. It outlives sessions: a relay paused before a reconnect stays paused.
// The zero value is running; it is safe for concurrent use.
type Pause struct {
	mu     sync.Mutex
	paused bool
	resume chan struct{} // closed on Resume; made on Pause
}

// Pause stops the stream at its next message boundary and reports whether it was
// running.
func (p *Pause) Pause() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		return false
	}
	p.paused, p.resume = true, make(chan struct{})
	return true
}

// Resume lets the stream read on and reports whether it was paused.
func (p *Pause) Resume() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		return false
	}
	p.paused = false
	close(p.resume)
	return true
}

// Paused reports whether the stream is held.
func (p *Pause) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// Wait returns once resumed, when until passes, or when ctx ends, and reports
// whether the stream may read on.
func (p *Pause) Wait(ctx context.Context, until time.Time) bool {
	p.mu.Lock()
	paused, resume := p.paused, p.resume
	p.mu.Unlock()
	if !paused {
		return true
	}
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	select {
	case <-resume:
		return true
	case <-timer.C:
	case <-ctx.Done():
	}
	return !p.Paused()
}
