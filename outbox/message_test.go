package outbox_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/walrelay/walrelay/outbox"
)

func sampleEvent() outbox.Event {
	return outbox.Event{
		ID: "0b9f4a52-6d3e-4c1a-9a7e-2f6b1c0d8e11", AggregateType: "order", AggregateID: "o-1",
		EventType: "order.created", Payload: []byte{'{', '}', 0, 0xff, '\n'},
		CreatedAt: time.Date(2026, 12, 1, 10, 0, 0, 123456000, time.UTC),
		Headers:   []outbox.Header{{Key: "traceparent", Value: "00-abc-def-01"}, {Key: "empty", Value: ""}},
	}
}

func TestMessageRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ev    outbox.Event
		table string
	}{
		{"all fields", sampleEvent(), "app.outbox_events"},
		{"no headers, first table", func() outbox.Event { e := sampleEvent(); e.Headers = nil; return e }(), ""},
		{"created before 1970", func() outbox.Event {
			e := sampleEvent()
			e.CreatedAt = time.Date(1960, 1, 1, 0, 0, 0, 1000, time.UTC)
			return e
		}(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content := outbox.MarshalMessage(&tc.ev, tc.table)
			got, table, err := outbox.UnmarshalMessage(content)
			if err != nil {
				t.Fatal(err)
			}
			if table != tc.table {
				t.Errorf("table %q, want %q", table, tc.table)
			}
			if !reflect.DeepEqual(got, tc.ev) {
				t.Errorf("decoded\n%+v\nwant\n%+v", got, tc.ev)
			}
			content[len(content)-1] ^= 0xff
			if got.Payload[len(got.Payload)-1] != tc.ev.Payload[len(tc.ev.Payload)-1] {
				t.Error("the decoded payload aliases the content")
			}
		})
	}
}

func TestMessageRejectsWhatIsNotAnEvent(t *testing.T) {
	good := sampleEvent()
	content := outbox.MarshalMessage(&good, "")
	noID := sampleEvent()
	noID.ID = "not-a-uuid"
	noType := sampleEvent()
	noType.EventType = ""
	for _, tc := range []struct {
		name    string
		content []byte
	}{
		{"empty", nil},
		{"plain text", []byte("heartbeat")},
		{"unknown version", append([]byte{'W', 9}, content[2:]...)},
		{"truncated", content[:len(content)-1]},
		{"trailing bytes", append(bytes.Clone(content), 0)},
		{"id not a UUID", outbox.MarshalMessage(&noID, "")},
		{"no event type", outbox.MarshalMessage(&noType, "")},
		{"huge header count", []byte{'W', 1, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := outbox.UnmarshalMessage(tc.content)
			var me *outbox.MessageError
			if !errors.As(err, &me) {
				t.Fatalf("error %v (%T), want *outbox.MessageError", err, err)
			}
		})
	}
}

// FuzzUnmarshalMessage: any content decodes to an event that encodes back to the
// same bytes, or to a *MessageError; never a panic.
func FuzzUnmarshalMessage(f *testing.F) {
	ev := sampleEvent()
	f.Add(outbox.MarshalMessage(&ev, "app.outbox"))
	f.Add([]byte("heartbeat"))
	f.Add([]byte{'W', 1})
	f.Fuzz(func(t *testing.T, content []byte) {
		got, table, err := outbox.UnmarshalMessage(content)
		if err != nil {
			var me *outbox.MessageError
			if !errors.As(err, &me) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		if again := outbox.MarshalMessage(&got, table); !bytes.Equal(again, content) {
			// Varints have one shortest form; only that form decodes back to itself.
			if _, _, err := outbox.UnmarshalMessage(again); err != nil {
				t.Fatalf("re-encoded event does not decode: %v", err)
			}
		}
	})
}
