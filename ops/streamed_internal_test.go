package ops

import (
	"strings"
	"testing"
	"time"
)

// A slot counts as streamed only while a walsender holds it and heard from its
// client within wal_sender_timeout; without a timeout, or with the times hidden
// from the reading role, the live walsender is enough.
func TestSlotStreamedRule(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ago time.Duration) *time.Time { t := now.Add(-ago); return &t }
	for _, c := range []struct {
		name   string
		holder slotHolder
		want   bool
		why    string
	}{
		{"inactive", slotHolder{Now: now, Timeout: time.Minute}, false, ""},
		{"held by a plain session", slotHolder{Active: true, PID: 7, Heard: at(0), Now: now, Timeout: time.Minute},
			false, "process 7 holds it but is not a walsender"},
		{"heard just now", slotHolder{Active: true, PID: 7, Walsender: true, Heard: at(time.Second), Now: now, Timeout: time.Minute}, true, ""},
		{"heard at the timeout", slotHolder{Active: true, PID: 7, Walsender: true, Heard: at(time.Minute), Now: now, Timeout: time.Minute}, true, ""},
		{"silent past the timeout", slotHolder{Active: true, PID: 7, Walsender: true, Heard: at(time.Minute + time.Millisecond),
			Now: now, Timeout: time.Minute}, false, "walsender 7 holds it but has not heard from its client for 1m0.001s"},
		{"client clock ahead", slotHolder{Active: true, PID: 7, Walsender: true, Heard: at(-time.Second), Now: now, Timeout: time.Minute}, true, ""},
		{"no timeout", slotHolder{Active: true, PID: 7, Walsender: true, Heard: at(time.Hour), Now: now}, true, ""},
		{"times hidden", slotHolder{Active: true, PID: 7, Walsender: true, Now: now, Timeout: time.Minute}, true, ""},
	} {
		got, why := c.holder.streamed()
		if got != c.want || !strings.Contains(why, c.why) || (c.why == "") != (why == "") {
			t.Errorf("%s: streamed() = %v, %q; want %v, %q", c.name, got, why, c.want, c.why)
		}
	}
}
