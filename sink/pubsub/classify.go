package pubsub

import (
	"errors"
	"strings"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// class is what a failed publish means for its event.
type class int

const (
	// classService: the service, or the way to it, failed (unavailable, deadline,
	// quota, credentials refused, internal errors, anything unknown). The event is
	// sent again, in its place, for as long as it takes; nothing is handed over.
	classService class = iota
	// classPaused: the client refused the event because an earlier one of its
	// ordering key failed. Not about the event: it is sent again once that earlier
	// failure is settled.
	classPaused
	// classEvent: Pub/Sub refused this event for what it is, and would again: too
	// large, invalid attributes or ordering key, a topic that does not exist or may
	// not be published to, a message its topic's schema rejects. An *sink.EventError.
	classEvent
)

func (c class) String() string {
	switch c {
	case classPaused:
		return "paused"
	case classEvent:
		return "event"
	default:
		return "service"
	}
}

// classify decides what a publish error means; see the class constants.
func classify(err error) class {
	var paused gpubsub.ErrPublishingPaused
	switch {
	case errors.As(err, &paused):
		return classPaused
	case errors.Is(err, errRefused), errors.Is(err, gpubsub.ErrOversizedMessage):
		return classEvent
	}
	switch status.Code(err) {
	case codes.InvalidArgument, // the message or its attributes break Pub/Sub's rules or the topic's schema
		codes.NotFound,           // the topic does not exist
		codes.PermissionDenied,   // the credentials may not publish to this topic
		codes.FailedPrecondition: // the topic cannot take messages in its state (a schema or ingestion setting)
		return classEvent
	case codes.Internal:
		// The client's marshalling of a string field that is not UTF-8: the
		// message's, so sending it again fails again (the client does not retry it).
		if strings.Contains(err.Error(), "invalid UTF-8") {
			return classEvent
		}
	}
	return classService
}
