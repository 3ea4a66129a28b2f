package sqs

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/walrelay/walrelay/internal/backoff"
	"github.com/walrelay/walrelay/sink"
)

// lookupTimeout bounds one attempt at a lookup.
const lookupTimeout = 10 * time.Second

// maxMessageSize is the largest message SQS takes, assumed when a queue's own
// MaximumMessageSize cannot be read (SQS then judges each message itself).
const maxMessageSize = 1 << 20

// lookup resolves q's name to its URL and reads its MaximumMessageSize, once: the
// queue keeps them until a send finds it gone. Throttling and no answer are retried;
// a queue that does not exist or may not be looked up fails its waiting events
// with an *sink.EventError (refused credentials: a plain error), and the next
// event published to it looks it up again.
func (s *Sink) lookup(ctx context.Context, q *queue) {
	defer s.workers.Done()
	delays := backoff.New(retryMin, retryMax)
	attempts := 0
	var firstFailure time.Time
	for {
		url, maxSize, err := s.resolve(ctx, q.name)
		if ctx.Err() != nil {
			s.mu.Lock()
			q.state = unknown // Close fails the waiting events
			s.mu.Unlock()
			return
		}
		if err == nil {
			s.mu.Lock()
			q.url, q.maxSize, q.state = url, maxSize, available
			s.mu.Unlock()
			s.signal()
			return
		}
		c := classify(err)
		if c == retry {
			attempts++
			if attempts == 1 {
				firstFailure = time.Now()
			}
			s.warn("sqs unavailable; retrying the queue lookup", err, q.name, 0, attempts, firstFailure)
			backoff.Sleep(ctx, delays.Next()) // an end of ctx is handled above
			continue
		}
		s.mu.Lock()
		q.state = unknown
		waiting := q.drain(nil)
		s.mu.Unlock()
		for _, it := range waiting {
			outcome := error(&sink.EventError{Err: fmt.Errorf("event %s: queue %s: %w; create the queue (a FIFO queue's name ends in .fifo) "+
				"or change --topic-template, and allow sqs:GetQueueUrl on it", it.ev.ID, q.name, err)})
			if c == rejected {
				outcome = fmt.Errorf("event %s: look up queue %s: sqs refused the credentials; check the AWS credentials and the endpoint: %w",
					it.ev.ID, q.name, err)
			}
			s.finish(it, outcome)
		}
		return
	}
}

// resolve asks SQS for a queue's URL and MaximumMessageSize.
func (s *Sink) resolve(ctx context.Context, name string) (url string, maxSize int, err error) {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	out, err := s.client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		return "", 0, err
	}
	url = aws.ToString(out.QueueUrl)
	attrs, err := s.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameMaximumMessageSize}})
	switch {
	case err != nil && classify(err) == retry:
		return "", 0, err
	case err != nil:
		s.log.Info("cannot read the queue's MaximumMessageSize; allow sqs:GetQueueAttributes so that events too large "+
			"for it fail before they are sent; sqs judges each one meanwhile", "queue", name, "err", err)
		return url, maxMessageSize, nil
	}
	maxSize, convErr := strconv.Atoi(attrs.Attributes[string(types.QueueAttributeNameMaximumMessageSize)])
	if convErr != nil || maxSize <= 0 {
		maxSize = maxMessageSize
	}
	return url, maxSize, nil
}

// forget marks q to be looked up again: a send found it gone or forbidden.
func (s *Sink) forget(q *queue) {
	s.mu.Lock()
	if q.state == available {
		q.state = unknown
	}
	s.mu.Unlock()
}
