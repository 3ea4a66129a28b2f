package sqs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/walrelay/walrelay/internal/backoff"
	"github.com/walrelay/walrelay/sink"
)

const (
	// requestTimeout bounds one attempt at a request.
	requestTimeout = 30 * time.Second
	// retryMin and retryMax bound the backoff between attempts.
	retryMin = 50 * time.Millisecond
	retryMax = 5 * time.Second
	// warnEvery is how often a failing SQS is logged.
	warnEvery = 10 * time.Second
)

// run is the dispatcher: it starts lookups for queues not known yet and requests
// for what the order rule (see queue) lets go, at most MaxInFlightRequests at once.
func (s *Sink) run(ctx context.Context) {
	defer close(s.stopped)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		wait := s.dispatch(ctx)
		var due <-chan time.Time
		if wait > 0 {
			timer.Reset(wait)
			due = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-due:
		}
		timer.Stop()
	}
}

// request is one SendMessageBatch request's events, for one queue.
type request struct {
	q     *queue
	items []*item
}

// dispatch starts what can start now and says how long until a lingering request
// is due (0: until woken).
func (s *Sink) dispatch(ctx context.Context) time.Duration {
	var (
		lookups  []*queue
		requests []request
		refused  []*item
		wait     time.Duration
	)
	now := time.Now()
	s.mu.Lock()
	for _, q := range s.mu.queues {
		if q.state == unknown && q.has() {
			q.state = looking
			lookups = append(lookups, q)
		}
	}
	for more := true; more && s.mu.requests < s.cfg.MaxInFlightRequests; {
		more = false
		for _, q := range s.mu.queues {
			if q.state != available || s.mu.requests >= s.cfg.MaxInFlightRequests {
				continue
			}
			ok, w := q.due(now, s.cfg.Linger)
			if !ok {
				if w > 0 && (wait == 0 || w < wait) {
					wait = w
				}
				continue
			}
			batch, r := q.take(s.cfg.MaxRequestBytes)
			refused = append(refused, r...)
			more = more || len(r) > 0
			if len(batch) > 0 {
				requests = append(requests, request{q: q, items: batch})
				s.mu.requests++
				more = true
			}
		}
	}
	s.workers.Add(len(lookups) + len(requests))
	s.mu.Unlock()

	for _, q := range lookups {
		go s.lookup(ctx, q)
	}
	// Refused events are settled before any request starts: a later event of the
	// same group may be in one.
	for _, it := range refused {
		err := it.err
		if err == nil {
			err = fmt.Errorf("%w: the message is %d bytes and queue %s takes at most %d (its MaximumMessageSize)",
				errMessage, it.size, it.q.name, it.q.maxSize)
		}
		s.settle(it, &sink.EventError{Err: fmt.Errorf("event %s: %w", it.ev.ID, err)})
	}
	for _, r := range requests {
		go s.deliver(ctx, r)
	}
	return wait
}

// deliver sends r until each of its events has an outcome from SQS, then frees
// its request slot.
func (s *Sink) deliver(ctx context.Context, r request) {
	defer func() {
		s.mu.Lock()
		s.mu.requests--
		s.mu.Unlock()
		s.signal()
		s.workers.Done()
	}()
	s.send(ctx, r.q, r.items)
}

// send makes attempts at items, one request each, until every item is settled:
// accepted (nil), refused for what it is (*sink.EventError), or, when the
// credentials are refused, failed with a plain error. Throttling, server errors and
// no answer are retried in place with backoff for as long as it takes, or until
// Close; the items' groups stay busy meanwhile, so nothing later overtakes them.
func (s *Sink) send(ctx context.Context, q *queue, items []*item) {
	delays := backoff.New(retryMin, retryMax)
	attempts := 0
	var firstFailure time.Time
	for len(items) > 0 {
		out, err := s.attempt(ctx, q, items)
		if ctx.Err() != nil {
			for _, it := range items {
				s.settle(it, ErrClosed)
			}
			return
		}
		var failed error // retried after a backoff
		switch c := classify(err); {
		case err == nil:
			items, failed = s.settleResults(q, items, out)
		case c == retry:
			failed = err
		case c == refused && len(items) > 1:
			// One entry spoils the request; one request each tells which.
			for _, it := range items {
				s.send(ctx, q, []*item{it})
			}
			return
		case c == refused || c == unusable:
			if c == unusable {
				s.forget(q)
			}
			for _, it := range items {
				s.settle(it, &sink.EventError{Err: fmt.Errorf("send event %s to queue %s: %w", it.ev.ID, q.name, err)})
			}
			return
		default:
			for _, it := range items {
				s.settle(it, fmt.Errorf("send event %s to queue %s: sqs refused the credentials; check the AWS "+
					"credentials (environment, shared files, role) and the endpoint: %w", it.ev.ID, q.name, err))
			}
			return
		}
		if failed == nil {
			continue
		}
		attempts++
		if attempts == 1 {
			firstFailure = time.Now()
		}
		s.warn("sqs unavailable; retrying in place, nothing is lost or reordered", failed, q.name, len(items), attempts, firstFailure)
		if !backoff.Sleep(ctx, delays.Next()) {
			for _, it := range items {
				s.settle(it, ErrClosed)
			}
			return
		}
	}
	if attempts > 0 {
		s.log.Info("sqs available again; request delivered", "queue", q.name, "failed_attempts", attempts,
			"failed_for", time.Since(firstFailure).Round(time.Millisecond).String())
	}
}

// attempt sends items in one SendMessageBatch request; entry i has Id "i".
func (s *Sink) attempt(ctx context.Context, q *queue, items []*item) (*sqs.SendMessageBatchOutput, error) {
	entries := make([]types.SendMessageBatchRequestEntry, len(items))
	for i, it := range items {
		entries[i] = it.entry
		entries[i].Id = aws.String(strconv.Itoa(i))
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return s.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
}

// errNoResult: SQS's answer named an entry neither accepted nor failed.
var errNoResult = errors.New("sqs answered without a result for the entry")

// settleResults settles each entry by its own result: accepted, refused by SQS as
// the sender's fault (an *sink.EventError), or failed on SQS's side, which is
// returned to be sent again with the error.
func (s *Sink) settleResults(q *queue, items []*item, out *sqs.SendMessageBatchOutput) ([]*item, error) {
	outcome := make([]error, len(items))
	for i := range outcome {
		outcome[i] = errNoResult
	}
	index := func(id *string) int {
		i, err := strconv.Atoi(aws.ToString(id))
		if err != nil || i < 0 || i >= len(items) {
			return -1
		}
		return i
	}
	for _, r := range out.Successful {
		if i := index(r.Id); i >= 0 {
			outcome[i] = nil
		}
	}
	for _, f := range out.Failed {
		if i := index(f.Id); i >= 0 {
			err := fmt.Errorf("%s: %s", aws.ToString(f.Code), aws.ToString(f.Message))
			if f.SenderFault {
				err = &sink.EventError{Err: fmt.Errorf("send event %s to queue %s: sqs refused it: %w", items[i].ev.ID, q.name, err)}
			}
			outcome[i] = err
		}
	}
	var again []*item
	var failed error
	for i, it := range items {
		switch err := outcome[i]; {
		case err == nil || sink.IsEventError(err):
			s.settle(it, err)
		default:
			again = append(again, it)
			failed = fmt.Errorf("entry failed on sqs's side: %w", err)
		}
	}
	return again, failed
}

// settle calls done for it, an event taken from its queue, then releases its
// group: the group's next event may be sent only now.
func (s *Sink) settle(it *item, err error) {
	it.done.Done(err)
	s.mu.Lock()
	it.q.settled(it)
	s.mu.outstanding.Add(-1)
	s.mu.Unlock()
	s.signal()
}

// warn logs a failing SQS at most every warnEvery, across all requests.
func (s *Sink) warn(msg string, err error, queue string, events, attempts int, since time.Time) {
	now := time.Now()
	last := s.lastWarn.Load()
	if now.UnixNano()-last < int64(warnEvery) || !s.lastWarn.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	s.log.Warn(msg, "err", err, "queue", queue, "events", events, "failed_attempts", attempts,
		"failing_for", now.Sub(since).Round(time.Millisecond).String())
}
