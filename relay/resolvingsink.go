package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/sink"
)

// resolvingSink resolves an event's ids before handing it on, for the catch-up
// pass, the poller and replays: Publish does not wait. An event whose ids are not
// cached, and every event after it while it waits, queue in order for a goroutine
// that resolves then hands them on, so no event overtakes an earlier one. An event
// whose registry does not answer fails as an unavailable broker does (it is tried
// again), with those queued behind it; one it refuses fails as an event error no
// retry fixes.
type resolvingSink struct {
	sink.Sink
	r *schemaResolver
	q *resolveQueue
}

func newResolvingSink(snk sink.Sink, r *schemaResolver) resolvingSink {
	return resolvingSink{Sink: snk, r: r, q: &resolveQueue{}}
}

// resolveQueue is what waits for ids, oldest first; the head stays in items
// until it was handed on, so that a Publish meanwhile queues behind it.
type resolveQueue struct {
	mu       sync.Mutex
	items    []queuedEvent
	draining bool
}

type queuedEvent struct {
	ev    *outbox.Event
	done  sink.Done
	needs []record.SchemaNeed
}

func (s resolvingSink) Publish(ev *outbox.Event, done sink.Done) {
	needs, err := s.r.f.Needs(ev, nil)
	if err != nil {
		done.Done(s.r.eventError(err))
		return
	}
	s.q.mu.Lock()
	if len(needs) == 0 && len(s.q.items) == 0 {
		s.q.mu.Unlock()
		s.Sink.Publish(ev, done)
		return
	}
	s.q.items = append(s.q.items, queuedEvent{ev: ev, done: done, needs: needs})
	if !s.q.draining {
		s.q.draining = true
		go s.drain()
	}
	s.q.mu.Unlock()
}

// drain resolves and hands on the queued events in order until none is left.
func (s resolvingSink) drain() {
	for {
		s.q.mu.Lock()
		if len(s.q.items) == 0 {
			s.q.draining = false
			s.q.mu.Unlock()
			return
		}
		head := s.q.items[0]
		s.q.mu.Unlock()
		err := s.resolveAll(head.needs)
		var refused *record.RefusedError
		switch {
		case err == nil:
			s.Sink.Publish(head.ev, head.done)
		case errors.As(err, &refused):
			head.done.Done(s.r.eventError(err))
		default:
			// The registry does not answer: fail what waits behind it too, so that
			// none is handed on out of order; each is tried again later.
			s.q.mu.Lock()
			failed := s.q.items
			s.q.items, s.q.draining = nil, false
			s.q.mu.Unlock()
			for _, q := range failed {
				q.done.Done(err)
			}
			return
		}
		s.q.mu.Lock()
		s.q.items = s.q.items[1:]
		s.q.mu.Unlock()
	}
}

func (s resolvingSink) resolveAll(needs []record.SchemaNeed) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range needs {
		if s.r.f.Schemas.Cached(n) {
			continue
		}
		if err := s.r.resolve(ctx, n); err != nil {
			var refused *record.RefusedError
			if errors.As(err, &refused) {
				return err
			}
			return fmt.Errorf("resolve the schema of subject %s: %w", n.Subject, err)
		}
	}
	return nil
}

// ResolvingSink is snk resolving schema ids first, as the relay configured by cfg
// does, for what publishes beside it (`walrelay replay`); snk itself when no
// converter uses a registry.
func ResolvingSink(cfg Config, snk sink.Sink, reg prometheus.Registerer) (sink.Sink, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	r, err := newSchemaResolver(cfg, slog.Default(), reg)
	if err != nil || r == nil {
		return snk, err
	}
	return newResolvingSink(snk, r), nil
}
