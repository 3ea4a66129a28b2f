package pubsub

import (
	"context"
	"fmt"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"

	"github.com/walrelay/walrelay/internal/backoff"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
)

// The ordering rule. The client sends one request at a time per ordering key, and
// after a failed one pauses the key: everything of the key it still holds, and
// everything published to it until ResumePublish, fails with ErrPublishingPaused.
// Per ordering key (the aggregate id, per topic) the sink keeps its events in
// publish order and holds the key once one of them fails:
//
//  1. Nothing more of the key is handed to the client until every event already
//     handed over has its result. That is a round.
//  2. Then, in publish order, the failed events are settled: an event Pub/Sub
//     refused for what it is gets its done (an *sink.EventError, which the relay
//     hands to the poller); the others (paused, or failed by the service) go back
//     to the front of the key's queue.
//  3. Only then is the key resumed and its queue sent, after a backoff when the
//     service failed. So a later event of an aggregate never reaches Pub/Sub
//     before an earlier one was either stored or handed over as an event error.
//
// An event refused before sending (check) counts as failed in its turn, without
// being sent. When several events of one request are refused as events, the
// request cannot say which of them is at fault: each is sent again alone, and
// only a refusal of an event alone is final.

// orderingKey is where Pub/Sub keeps order: an ordering key within a topic.
type orderingKey struct{ topic, key string }

// key is the state of one ordering key, guarded by Sink.mu. An event is in queue
// (not yet handed to the client), flight (handed over, result pending), or failed
// (its result was an error, the round is not over).
type key struct {
	id       orderingKey
	queue    []*pending
	flight   []*pending
	failed   []*pending
	waiting  bool // a waiter goroutine reads flight's results
	barrier  bool // nothing more is sent until the flight has landed
	sleeping bool // the backoff after a failure of the service
	retry    *backoff.Backoff
}

// pending is one published event until its done is called.
type pending struct {
	ev      *outbox.Event
	done    sink.Done
	topic   string
	msg     *gpubsub.Message
	refused error                  // check's verdict: fails in its turn without being sent
	res     *gpubsub.PublishResult // nil until sent
	failure error                  // the last attempt's, while in failed
	alone   bool                   // send it in a request of its own
	settled bool                   // done was called (by its waiter or by Close)
}

// Backoff between rounds after a failure of the service, per key.
const (
	retryMin = 200 * time.Millisecond
	retryMax = 2 * time.Second
)

// sendLocked hands k's queue to the client in order, as far as the rule allows, and
// starts k's waiter when something is in flight.
func (s *Sink) sendLocked(k *key) {
	if s.mu.closed || k.barrier || k.sleeping {
		return
	}
	for len(k.queue) > 0 {
		p := k.queue[0]
		if p.alone && len(k.flight) > 0 {
			break // it goes once the earlier ones landed, so that no request joins them
		}
		k.queue[0] = nil
		k.queue = k.queue[1:]
		if p.refused == nil {
			p.res = s.publisherLocked(p.topic).Publish(context.Background(), p.msg)
		}
		k.flight = append(k.flight, p)
		if p.refused != nil || p.alone {
			k.barrier = true
			break
		}
	}
	if len(k.flight) > 0 && !k.waiting {
		k.waiting = true
		go s.wait(k)
	}
}

// wait takes k's results in publish order: a stored event is acknowledged at once;
// a failure holds the key until the round is over, then resolve settles it.
func (s *Sink) wait(k *key) {
	for {
		s.mu.Lock()
		if len(k.flight) == 0 {
			k.waiting = false
			failed := k.failed
			k.failed = nil
			if len(failed) > 0 {
				s.mu.Unlock()
				s.resolve(k, failed) // the barrier stays up until resolve has requeued them
				return
			}
			k.barrier = false
			s.sendLocked(k)
			s.dropIdleLocked(k)
			s.mu.Unlock()
			return
		}
		p := k.flight[0]
		s.mu.Unlock()

		err := p.refused
		if p.res != nil {
			<-p.res.Ready()
			_, err = p.res.Get(context.Background())
		}

		s.mu.Lock()
		k.flight[0] = nil
		k.flight = k.flight[1:]
		if err != nil {
			p.failure = err
			k.failed = append(k.failed, p)
			k.barrier = true
			s.mu.Unlock()
			continue
		}
		if k.retry != nil {
			k.retry.Reset()
		}
		s.mu.Unlock()
		s.finish(p, nil)
	}
}

// resolve ends a round: it settles k's failed events, in publish order, as the rule
// says, then resumes the key.
func (s *Sink) resolve(k *key, failed []*pending) {
	together := 0 // refused as events in a request with others
	for _, p := range failed {
		if p.res != nil && !p.alone && classify(p.failure) == classEvent {
			together++
		}
	}
	var again []*pending
	var serviceErr error
	for _, p := range failed {
		switch c := classify(p.failure); {
		case c == classEvent && p.res != nil && !p.alone && together > 1:
			p.alone = true
			again = append(again, p)
		case c == classEvent:
			s.finish(p, &sink.EventError{Err: fmt.Errorf("pubsub topic %s refused event %s: %w", p.topic, p.ev.ID, p.failure)})
		case c == classService:
			serviceErr = p.failure
			again = append(again, p)
		default: // paused behind an earlier failure
			again = append(again, p)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return // Close settled them
	}
	k.queue = append(again, k.queue...)
	k.barrier = false
	if k.id.key != "" {
		s.publisherLocked(k.id.topic).ResumePublish(k.id.key)
	}
	if serviceErr == nil {
		s.sendLocked(k)
		s.dropIdleLocked(k)
		return
	}
	if k.retry == nil {
		k.retry = backoff.New(retryMin, retryMax)
	}
	wait := k.retry.Next()
	k.sleeping = true
	s.warn(k, serviceErr, len(k.queue), wait)
	time.AfterFunc(wait, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		k.sleeping = false
		s.sendLocked(k)
	})
}

// dropIdleLocked forgets k once it holds nothing, so that the aggregates seen
// once do not pile up.
func (s *Sink) dropIdleLocked(k *key) {
	if len(k.queue) == 0 && len(k.flight) == 0 && len(k.failed) == 0 && !k.waiting && !k.sleeping && s.mu.keys[k.id] == k {
		delete(s.mu.keys, k.id)
	}
}
