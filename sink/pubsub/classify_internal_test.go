package pubsub

import (
	"context"
	"errors"
	"fmt"
	"testing"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestClassify(t *testing.T) {
	grpcErr := func(c codes.Code, msg string) error { return status.Error(c, msg) }
	// As the client returns them: gax wraps the gRPC status in an APIError.
	wrapped := func(c codes.Code, msg string) error {
		ae, ok := apierror.FromError(status.Error(c, msg))
		if !ok {
			t.Fatalf("apierror.FromError(%s) failed", c)
		}
		return ae
	}
	for _, tc := range []struct {
		name string
		err  error
		want class
	}{
		// About the event: handed to the poller.
		{"refused before sending", fmt.Errorf("event x: %w: the message is 10000042 bytes", errRefused), classEvent},
		{"client: oversized", gpubsub.ErrOversizedMessage, classEvent},
		{"invalid argument", grpcErr(codes.InvalidArgument, "message does not match the schema"), classEvent},
		{"invalid argument, wrapped", wrapped(codes.InvalidArgument, "attribute key too long"), classEvent},
		{"topic not found", wrapped(codes.NotFound, "Resource not found (resource=outbox.event.order)"), classEvent},
		{"not allowed on the topic", wrapped(codes.PermissionDenied, "User not authorized to perform this action."), classEvent},
		{"failed precondition", grpcErr(codes.FailedPrecondition, "topic is in a state that does not accept messages"), classEvent},
		{"invalid UTF-8 in marshalling", grpcErr(codes.Internal, "grpc: error while marshaling: string field contains invalid UTF-8"), classEvent},

		// Behind an earlier failure of its ordering key: sent again.
		{"paused", gpubsub.ErrPublishingPaused{OrderingKey: "agg"}, classPaused},
		{"paused, wrapped", fmt.Errorf("publish: %w", gpubsub.ErrPublishingPaused{OrderingKey: "agg"}), classPaused},

		// The service: sent again in place.
		{"unavailable", wrapped(codes.Unavailable, "connection refused"), classService},
		{"deadline", grpcErr(codes.DeadlineExceeded, "context deadline exceeded"), classService},
		{"bare deadline", context.DeadlineExceeded, classService},
		{"quota", wrapped(codes.ResourceExhausted, "quota exceeded"), classService},
		{"credentials refused", wrapped(codes.Unauthenticated, "invalid authentication credentials"), classService},
		{"internal", grpcErr(codes.Internal, "internal error"), classService},
		{"aborted", grpcErr(codes.Aborted, "aborted"), classService},
		{"unknown", errors.New("something else"), classService},
		{"publisher stopped", gpubsub.ErrPublisherStopped, classService},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(tc.err); got != tc.want {
				t.Errorf("classify(%v) = %s, want %s", tc.err, got, tc.want)
			}
		})
	}
}

func TestCheckTopic(t *testing.T) {
	for id, ok := range map[string]bool{
		"outbox.event.order": true, "a-b_c.d~e+f%20": true, "Abc": true,
		"ab": false, "1abc": false, "goog.events": false, "outbox event": false, "outbox/event": false,
		"outbox.évent": false, string(make([]byte, 256)): false,
	} {
		if err := checkTopic(id); (err == nil) != ok {
			t.Errorf("checkTopic(%.20q) = %v, want ok %t", id, err, ok)
		}
	}
}
