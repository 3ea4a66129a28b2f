package redis

import (
	"context"
	"fmt"
	"time"

	"github.com/walrelay/walrelay/internal/backoff"
	"github.com/walrelay/walrelay/sink"
)

const (
	// maxBatchBytes caps the payload bytes of one script call, so a batch of large
	// events does not hold the server (which runs a script alone) for long.
	maxBatchBytes = 8 << 20
	// retryMin and retryMax bound the backoff between attempts at a batch.
	retryMin = 20 * time.Millisecond
	retryMax = time.Second
	// warnEvery is how often a batch that keeps failing is logged.
	warnEvery = 10 * time.Second
)

// run is the sender: one goroutine, one batch at a time, so a batch that fails is
// retried before anything published after it is sent.
func (s *Sink) run(ctx context.Context) {
	defer close(s.stopped)
	for {
		batch := s.collect(ctx)
		if batch == nil {
			return
		}
		s.deliver(ctx, batch)
	}
}

// collect waits for the first queued event, then up to Linger for BatchSize of
// them; it returns nil when ctx ends.
func (s *Sink) collect(ctx context.Context) []*item {
	var linger <-chan time.Time
	lingered := s.cfg.Linger <= 0
	for {
		s.mu.Lock()
		n := len(s.mu.queue)
		if n > 0 && (lingered || n >= s.cfg.BatchSize) {
			k, size := 0, 0
			for k < n && k < s.cfg.BatchSize && (k == 0 || size+len(s.mu.queue[k].ev.Payload) <= maxBatchBytes) {
				size += len(s.mu.queue[k].ev.Payload)
				k++
			}
			batch := make([]*item, k)
			copy(batch, s.mu.queue)
			clear(s.mu.queue[:k])
			s.mu.queue = s.mu.queue[k:]
			s.mu.Unlock()
			return batch
		}
		s.mu.Unlock()
		if n > 0 && linger == nil {
			t := time.NewTimer(s.cfg.Linger)
			defer t.Stop()
			linger = t.C
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		case <-linger:
			lingered = true
		}
	}
}

// deliver sends batch until every event has its outcome from Redis: an entry id or
// a duplicate (nil), an error about the event alone (*sink.EventError), or an error
// about the whole call that retrying will not fix (a broker error for the batch and
// everything queued behind it, so no later event overtakes it). Transient failures
// are retried with capped backoff for as long as it takes, or until Close.
func (s *Sink) deliver(ctx context.Context, batch []*item) {
	pending := batch
	delays := backoff.New(retryMin, retryMax)
	attempts := 0
	var firstFailure, lastWarn time.Time
	for len(pending) > 0 {
		replies, err := s.exec(ctx, pending)
		if err != nil && ctx.Err() != nil {
			s.settle(pending, ErrClosed)
			return
		}
		var failed error // transient, for the backoff below
		switch {
		case err != nil && classify(err) == reject:
			err = fmt.Errorf("run append script for %d events: %w", len(pending), err)
			s.mu.Lock()
			rest := s.mu.queue
			s.mu.queue = nil
			s.mu.Unlock()
			s.settle(pending, err)
			s.settle(rest, err)
			return
		case err != nil:
			failed = err
		default:
			settled := len(replies)
			var outcome error // of the last settled event, when it failed on its own
			if last, isErr := replies[settled-1].(error); isErr {
				it := pending[settled-1]
				if classify(last) == retry {
					failed = fmt.Errorf("append to stream %s: %w", it.stream, last)
					settled--
				} else {
					outcome = &sink.EventError{Err: fmt.Errorf("append event %s to stream %s: %w", it.ev.ID, it.stream, last)}
				}
			}
			for i, it := range pending[:settled] {
				if i == settled-1 {
					it.done.Done(outcome)
				} else {
					it.done.Done(nil)
				}
			}
			s.finished(settled)
			pending = pending[settled:]
		}
		if failed == nil {
			delays.Reset()
			continue
		}
		attempts++
		now := time.Now()
		if attempts == 1 {
			firstFailure = now
		}
		if now.Sub(lastWarn) >= warnEvery {
			lastWarn = now
			s.log.Warn("redis unavailable; retrying the batch, nothing is lost or reordered",
				"err", failed, "events", len(pending), "failed_attempts", attempts, "failing_for", now.Sub(firstFailure).Round(time.Millisecond).String())
		}
		if !backoff.Sleep(ctx, delays.Next()) {
			s.settle(pending, ErrClosed)
			return
		}
	}
	if attempts > 0 {
		s.log.Info("redis available again; batch delivered", "failed_attempts", attempts,
			"failed_for", time.Since(firstFailure).Round(time.Millisecond).String())
	}
}
