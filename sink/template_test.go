package sink_test

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
)

func TestTemplate(t *testing.T) {
	ev := &outbox.Event{AggregateType: "order", EventType: "order.created"}
	for _, tc := range []struct {
		tmpl, want, err string
	}{
		{"outbox.event.{aggregate_type}", "outbox.event.order", ""},
		{"{event_type}", "order.created", ""},
		{"x.{aggregate_type}.{event_type}.y", "x.order.order.created.y", ""},
		{"fixed", "fixed", ""},
		{"", "", "empty"},
		{"x.{nope}", "", "unknown placeholder {nope}"},
		{"x.{aggregate_type", "", "unclosed"},
		{"x}", "", "unmatched"},
	} {
		tmpl, err := sink.ParseTemplate(tc.tmpl)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: want error %q, got %v", tc.tmpl, tc.err, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.tmpl, err)
		}
		if got := tmpl.Render(ev); got != tc.want {
			t.Errorf("%q rendered %q, want %q", tc.tmpl, got, tc.want)
		}
	}
}

// Templates picks an event's own template and falls back to the default.
func TestTemplatesPerEvent(t *testing.T) {
	def, err := sink.ParseTemplate("outbox.event.{aggregate_type}")
	if err != nil {
		t.Fatal(err)
	}
	var ts sink.Templates
	ev := &outbox.Event{AggregateType: "order", EventType: "placed"}
	if got := ts.Render(def, ev); got != "outbox.event.order" {
		t.Errorf("without its own template: %q, want outbox.event.order", got)
	}
	ev.TopicTemplate = "b.{event_type}"
	if got := ts.Render(def, ev); got != "b.placed" {
		t.Errorf("with its own template: %q, want b.placed", got)
	}
	ev.TopicTemplate = "b.{tenant}" // the relay rejects it at start; the sink falls back
	if got := ts.Render(def, ev); got != "outbox.event.order" {
		t.Errorf("with a template that does not parse: %q, want the default outbox.event.order", got)
	}
}
