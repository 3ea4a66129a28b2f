package nats

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// class is what a failed publish attempt means for its event.
type class int

const (
	// classBroker: the broker as a whole cannot take events (JetStream disabled,
	// stream full or offline, account limits, sink closed, anything unknown). The
	// event fails with a plain error; the relay retries the stream, nothing is
	// handed over.
	classBroker class = iota
	// classReconnect: the connection is down or the client's own limits pushed
	// back. The event is sent again once connected, for as long as it takes.
	classReconnect
	// classTransient: no answer in time, or JetStream asked to come back later.
	// The event is sent again a few times; then it fails like an event (when
	// others were acknowledged meanwhile) or like the broker (when none were).
	classTransient
	// classNoResponders: nothing answered on the subject. Which stream captures
	// the subject decides: none is an event failure, one is transient.
	classNoResponders
	// classEvent: about this event alone, and sending it again gives the same
	// answer (too large, invalid subject, no stream captures its subject).
	classEvent
)

func (c class) String() string {
	switch c {
	case classReconnect:
		return "reconnect"
	case classTransient:
		return "transient"
	case classNoResponders:
		return "no-responders"
	case classEvent:
		return "event"
	default:
		return "broker"
	}
}

// JetStream API error codes a publish can get (nats-server errors.json).
const (
	codeMessageExceedsMaximum  jetstream.ErrorCode = 10054 // stream max_msg_size
	codeHeaderExceedsMaximum   jetstream.ErrorCode = 10097 // headers over 64 KiB
	codeClusterNotAvailable    jetstream.ErrorCode = 10008 // JetStream temporarily unavailable
	codeDuplicateMsgInProgress jetstream.ErrorCode = 10158 // the same Nats-Msg-Id is being stored
	codeTooManyRequests        jetstream.ErrorCode = 10167
)

var (
	// errNoStream: no stream captures the subject (found after no responders).
	errNoStream = errors.New("no stream captures the subject")
	// errStreamSilent: a stream captures the subject but nothing answered.
	errStreamSilent = errors.New("a stream captures the subject but did not answer")
	// errClosed: the sink was closed before the event's outcome was known.
	errClosed = errors.New("nats sink closed before the broker acknowledged the event")
)

// classify decides what a publish error means; see the class constants.
func classify(err error) class {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrReconnectBufExceeded),
		errors.Is(err, jetstream.ErrTooManyStalledMsgs),
		lostConnection(err):
		return classReconnect
	case errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrNoResponders):
		return classNoResponders
	case errors.Is(err, jetstream.ErrAsyncPublishTimeout),
		errors.Is(err, nats.ErrTimeout),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, jetstream.ErrInvalidJSAck),
		errors.Is(err, errStreamSilent):
		return classTransient
	case errors.Is(err, nats.ErrMaxPayload),
		errors.Is(err, nats.ErrBadSubject),
		errors.Is(err, errInvalidSubject),
		errors.Is(err, errNoStream):
		return classEvent
	case errors.As(err, &apiErr):
		switch apiErr.ErrorCode {
		case codeMessageExceedsMaximum, codeHeaderExceedsMaximum:
			return classEvent
		case codeClusterNotAvailable, codeDuplicateMsgInProgress, codeTooManyRequests:
			return classTransient
		}
	}
	return classBroker
}

// lostConnection reports a write or read on a connection that just died (a broken
// pipe, a reset, an end of stream): the client reconnects, so it is the outage's,
// not the broker's. Failing the event instead would let newer events, sent after the
// reconnect, overtake it.
func lostConnection(err error) bool {
	var netErr *net.OpError
	return errors.As(err, &netErr) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
