// Package sink defines how the relay hands events to a broker (Sink), and what
// exactly-once delivery needs of one (Transactional). The brokers are its
// subpackages: sink/kafka, sink/nats, sink/rabbitmq, sink/redis, sink/sqs,
// sink/pubsub, sink/http;
// sink/sinks builds any of them from one configuration.
//
// A sink acknowledges each event through a callback only when the broker made it
// durable by the broker's own standard (Kafka: acks=all), and reports an error only
// when its own retries are over. The relay never confirms an LSN on anything less.
package sink

import (
	"context"
	"errors"

	"github.com/walrelay/walrelay/outbox"
)

// EventError is a failure of one event that retrying it in place will not fix (too
// large, invalid, a topic that does not exist or is forbidden; each sink documents
// what it counts). The relay hands such an event to the poller's bookkeeping and
// moves on. Any other publish error means the broker, or the part of it the event
// goes to, is unavailable: nothing is handed over and the stream is retried, so
// the event keeps its place in its aggregate's order.
type EventError struct {
	Err error
	// Final: no retry can deliver the event as it is (larger than the producer's own
	// limit), so it is a dead letter at once rather than after every attempt.
	Final bool
}

func (e *EventError) Error() string { return e.Err.Error() }
func (e *EventError) Unwrap() error { return e.Err }

// IsEventError reports whether err is about one event rather than the broker.
func IsEventError(err error) bool {
	var ee *EventError
	return errors.As(err, &ee)
}

// IsFinal reports whether err is an event error that no retry can fix.
func IsFinal(err error) bool {
	var ee *EventError
	return errors.As(err, &ee) && ee.Final
}

// Done is told how one Publish ended. An interface rather than a func so that the
// caller's per-event state can be the callback: a method value would cost an
// allocation per event.
type Done interface{ Done(err error) }

// DoneFunc lets a function be a Done.
type DoneFunc func(error)

// Done calls f.
func (f DoneFunc) Done(err error) { f(err) }

// Sink publishes events to a broker.
type Sink interface {
	// Publish hands e to the broker without waiting for it; done.Done is called
	// exactly once, from any goroutine, with nil when the broker acknowledged e or with
	// the error that ended its delivery (an *EventError when it is about e alone). It
	// must not block. The sink may keep e until then.
	Publish(e *outbox.Event, done Done)
	// Flush waits until done was called for every published event, or ctx ends.
	Flush(ctx context.Context) error
	// Ping checks that the broker answers.
	Ping(ctx context.Context) error
	// Close releases the client; events still in flight fail.
	Close()
}

// ErrorReporter is a Sink that can say what last went wrong between its client and
// the broker, for the relay's log and /readyz while the broker does not acknowledge.
type ErrorReporter interface {
	// LastError is the last error the client met connecting to, writing to or
	// reading from the broker since it last succeeded, or nil.
	LastError() error
}
