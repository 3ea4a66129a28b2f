package relay

import "testing"

// The exactly-once position's decoding fingerprint changes with what makes a
// transaction's events, and only with that: the tables streamed, in any order, and
// the messages prefix.
func TestDecodingFingerprint(t *testing.T) {
	relay := func(prefix string, tables ...string) *Relay {
		r := &Relay{cfg: Config{MessagePrefix: prefix}}
		for _, name := range tables {
			r.tables = append(r.tables, table{name: name})
		}
		return r
	}
	base := relay("walrelay.event", "public.outbox_events", "tenant_b.outbox").decoding()
	for _, tc := range []struct {
		name string
		r    *Relay
		same bool
	}{
		{"the same", relay("walrelay.event", "public.outbox_events", "tenant_b.outbox"), true},
		{"tables in another order", relay("walrelay.event", "tenant_b.outbox", "public.outbox_events"), true},
		{"a table taken out", relay("walrelay.event", "public.outbox_events"), false},
		{"a table added", relay("walrelay.event", "public.outbox_events", "tenant_b.outbox", "tenant_c.outbox"), false},
		{"messages off", relay("", "public.outbox_events", "tenant_b.outbox"), false},
		{"another prefix", relay("app.event", "public.outbox_events", "tenant_b.outbox"), false},
	} {
		if got := tc.r.decoding() == base; got != tc.same {
			t.Errorf("%s: same fingerprint %t, want %t", tc.name, got, tc.same)
		}
	}
	origin, decoding := splitPositionOrigin("system=1 database=\"db\" slot=\"s\" slot_created=none timeline=1" + decodingField + base)
	if origin != "system=1 database=\"db\" slot=\"s\" slot_created=none timeline=1" || decoding != base {
		t.Errorf("split %q, %q", origin, decoding)
	}
	if _, decoding := splitPositionOrigin("system=1 database=\"db\" slot=\"s\" slot_created=none timeline=1"); decoding != "" {
		t.Errorf("a position without its decoding has decoding %q", decoding)
	}
}
