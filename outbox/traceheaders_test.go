package outbox_test

import (
	"testing"

	"github.com/walrelay/walrelay/outbox"
)

func TestParseTraceColumn(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	cases := []struct {
		name, content, parent, state string
		ok                           bool
	}{
		{"bare traceparent", tp, tp, "", true},
		{"bare, surrounding space", " " + tp + "\n", tp, "", true},
		{"future version with more fields", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
			"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", "", true},
		{"debezium properties", "#Thu Nov 26 10:00:00 UTC 2026\r\ntraceparent=" + tp + "\r\ntracestate=rojo\\=00f067aa0ba902b7\r\n",
			tp, "rojo=00f067aa0ba902b7", true},
		{"properties with colon separator and comments", "! comment\n  traceparent : " + tp + "\nother=x\n", tp, "", true},
		{"properties with unicode escape", "traceparent=" + tp + "\ntracestate=a\\u003db\n", tp, "a=b", true},
		{"tracestate alone", "tracestate=a=b\n", "", "", false},
		{"version 00 with more", tp + "-x", "", "", false},
		{"version ff", "ff" + tp[2:], "", "", false},
		{"upper-case hex", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "", "", false},
		{"zero parent id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "", "", false},
		{"empty", "", "", "", false},
		{"json", `{"traceparent":"` + tp + `"}`, "", "", false},
		{"tracestate with a control character dropped", "traceparent=" + tp + "\ntracestate=a\\tb\n", tp, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			parent, state, ok := outbox.ParseTraceColumn(tc.content)
			if parent != tc.parent || state != tc.state || ok != tc.ok {
				t.Errorf("got (%q, %q, %v), want (%q, %q, %v)", parent, state, ok, tc.parent, tc.state, tc.ok)
			}
		})
	}
}

func TestHeaderColumnsValidate(t *testing.T) {
	cols := outbox.DefaultColumns()
	for _, tc := range []struct {
		setting string
		bad     bool
	}{
		{"tenant_id:tenant,region", false},
		{"tenant_id:id", true},          // walrelay's own header
		{"tenant_id:t,region:T", true},  // placed twice
		{"tenant_id:ten ant", true},     // not a header key
		{"1tenant:tenant", true},        // not a column name
		{"tenant_id:traceparent", true}, // the trace column's
	} {
		hs, err := outbox.ParseHeaderColumns(tc.setting)
		if err == nil {
			c := cols
			c.Headers = hs
			err = c.Validate()
		}
		if (err != nil) != tc.bad {
			t.Errorf("%q: err %v, want error %v", tc.setting, err, tc.bad)
		}
		if !tc.bad && outbox.FormatHeaderColumns(hs) != tc.setting {
			t.Errorf("%q formats back as %q", tc.setting, outbox.FormatHeaderColumns(hs))
		}
	}
	if _, err := outbox.ParseHeaderColumns("a:b:c"); err == nil {
		t.Error("a:b:c parsed; want an error")
	}
}
