package nats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func apiError(code int, errCode jetstream.ErrorCode, desc string) error {
	return &jetstream.APIError{Code: code, ErrorCode: errCode, Description: desc}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want class
	}{
		// The connection: sent again once connected, however long that takes.
		{"disconnected (pending acks reset on reconnect)", nats.ErrDisconnected, classReconnect},
		{"reconnecting", nats.ErrConnectionReconnecting, classReconnect},
		{"publish while reconnecting, no buffer", nats.ErrReconnectBufExceeded, classReconnect},
		{"max pending stall", jetstream.ErrTooManyStalledMsgs, classReconnect},
		{"wrapped disconnect", fmt.Errorf("publish: %w", nats.ErrDisconnected), classReconnect},
		{"write on a dying connection", &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}, classReconnect},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), classReconnect},
		{"end of stream", io.EOF, classReconnect},

		// No responders: which stream captures the subject decides.
		{"no stream response after retries", jetstream.ErrNoStreamResponse, classNoResponders},
		{"no responders", nats.ErrNoResponders, classNoResponders},

		// Transient while connected: a few more attempts.
		{"ack timeout", jetstream.ErrAsyncPublishTimeout, classTransient},
		{"request timeout", nats.ErrTimeout, classTransient},
		{"lookup deadline", fmt.Errorf("look up: %w", context.DeadlineExceeded), classTransient},
		{"garbled ack", jetstream.ErrInvalidJSAck, classTransient},
		{"stream exists but silent", fmt.Errorf("%w (stream OUTBOX)", errStreamSilent), classTransient},
		{"jetstream temporarily unavailable", apiError(503, 10008, "JetStream system temporarily unavailable"), classTransient},
		{"duplicate id in process", apiError(409, 10158, "duplicate message id is in process"), classTransient},
		{"too many requests", apiError(429, 10167, "too many requests"), classTransient},

		// About this event, and it would repeat.
		{"over max_payload", nats.ErrMaxPayload, classEvent},
		{"bad subject (client)", nats.ErrBadSubject, classEvent},
		{"invalid rendered subject", fmt.Errorf("event x: %w", errInvalidSubject), classEvent},
		{"no stream captures the subject", fmt.Errorf("%w; add it", errNoStream), classEvent},
		{"over stream max_msg_size", apiError(400, 10054, "message size exceeds maximum allowed"), classEvent},
		{"over max_msg_size, wrapped", fmt.Errorf("nats: %w", apiError(400, 10054, "message size exceeds maximum allowed")), classEvent},
		{"headers over 64k", apiError(400, 10097, "header size exceeds maximum allowed of 64k"), classEvent},
		{"predefined exceeds maximum", jetstream.ErrStreamMessageExceedsMaximum, classEvent},

		// The broker as a whole.
		{"stream full, discard new", apiError(503, 10077, "maximum messages exceeded"), classBroker},
		{"insufficient resources", apiError(503, 10023, "insufficient resources"), classBroker},
		{"account limits", apiError(400, 10002, "resource limits exceeded for account"), classBroker},
		{"sealed stream", apiError(400, 10109, "invalid operation on sealed stream"), classBroker},
		{"stream offline", apiError(500, 10118, "stream is offline"), classBroker},
		{"jetstream not enabled", jetstream.ErrJetStreamNotEnabled, classBroker},
		{"jetstream not enabled for account", jetstream.ErrJetStreamNotEnabledForAccount, classBroker},
		{"connection closed", nats.ErrConnectionClosed, classBroker},
		{"draining", nats.ErrConnectionDraining, classBroker},
		{"headers not supported", nats.ErrHeadersNotSupported, classBroker},
		{"sink closed", errClosed, classBroker},
		{"closing", context.Canceled, classBroker},
		{"unknown", errors.New("something else"), classBroker},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(tc.err); got != tc.want {
				t.Errorf("classify(%v) = %s, want %s", tc.err, got, tc.want)
			}
		})
	}
}

func TestStreamSubject(t *testing.T) {
	for _, tc := range []struct {
		template, want string
		wantErr        bool
	}{
		{"outbox.event.{aggregate_type}", "outbox.event.>", false},
		{"outbox.event.{aggregate_type}.{event_type}", "outbox.event.>", false},
		{"app.outbox{aggregate_type}", "app.>", false},
		{"events", "events", false},
		{"app.events", "app.events", false},
		{"{aggregate_type}.events", "", true},
		{"outbox{aggregate_type}", "", true},
		{".{aggregate_type}", "", true},
		{"a..b.{event_type}", "", true},
		{"a.*.{event_type}", "", true},
		{"a.>", "", true},
	} {
		got, err := streamSubject(tc.template)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("streamSubject(%q) = %q, %v; want %q (error %t)", tc.template, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestCheckSubjectAndCaptures(t *testing.T) {
	for subject, ok := range map[string]bool{
		"outbox.event.order": true, "outbox.event.a-b_c": true, "x": true,
		"": false, "outbox.event.": false, "outbox..order": false, "outbox.event.my order": false,
		"outbox.event.*": false, "outbox.event.>": false, "outbox.event.a\tb": false,
	} {
		if err := checkSubject(subject); (err == nil) != ok {
			t.Errorf("checkSubject(%q) = %v, want ok %t", subject, err, ok)
		}
	}
	for _, tc := range []struct {
		filter, subject string
		want            bool
	}{
		{"outbox.event.>", "outbox.event.order", true},
		{"outbox.event.>", "outbox.event.order.created", true},
		{"outbox.event.>", "outbox.event", false},
		{"outbox.event.>", "outbox.other.order", false},
		{"events", "events", true},
		{"events", "events.x", false},
	} {
		if got := captures(tc.filter, tc.subject); got != tc.want {
			t.Errorf("captures(%q, %q) = %t, want %t", tc.filter, tc.subject, got, tc.want)
		}
	}
}
