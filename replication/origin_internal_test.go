package replication

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/catalog"
)

// Continues without a timeline change needs no server: each difference alone makes
// a position foreign.
func TestContinuesOnOneTimeline(t *testing.T) {
	created := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	here := catalog.Origin{System: "100", Database: "app", Slot: "walrelay", SlotCreated: created, Timeline: 2}
	const server = pglogrepl.LSN(0x5000000)
	cases := []struct {
		name   string
		stored func(*catalog.Origin)
		lsn    pglogrepl.LSN
		ok     bool
		why    string
	}{
		{"same", func(*catalog.Origin) {}, server - 1, true, ""},
		{"at the server position", func(*catalog.Origin) {}, server, true, ""},
		{"another cluster", func(o *catalog.Origin) { o.System = "200" }, 0x100, false, "another database cluster"},
		{"another database", func(o *catalog.Origin) { o.Database = "other" }, 0x100, false, "another database or slot"},
		{"earlier slot", func(o *catalog.Origin) { o.SlotCreated = created.Add(-time.Hour) }, 0x100, false, "earlier incarnation"},
		{"slot not created by walrelay", func(o *catalog.Origin) { o.SlotCreated = time.Time{} }, 0x100, false, "earlier incarnation"},
		{"beyond the server", func(*catalog.Origin) {}, server + 1, false, "restored from an older copy"},
		{"later timeline", func(o *catalog.Origin) { o.Timeline = 3 }, 0x100, false, "a later timeline"},
	}
	c := &Conn{}
	for _, tc := range cases {
		stored := here
		tc.stored(&stored)
		ok, why, err := c.Continues(context.Background(), stored, tc.lsn, here, server)
		if err != nil || ok != tc.ok || !strings.Contains(why, tc.why) {
			t.Errorf("%s: Continues = %v, %q, %v; want %v, %q", tc.name, ok, why, err, tc.ok, tc.why)
		}
	}
}

func TestTimelineEnd(t *testing.T) {
	history := []byte("1\t0/3000060\tno recovery target specified\n\n2\t0/5000000\tafter failover\n")
	for _, tc := range []struct {
		tli   int32
		end   pglogrepl.LSN
		found bool
	}{{1, 0x3000060, true}, {2, 0x5000000, true}, {3, 0, false}} {
		end, found, err := timelineEnd(history, tc.tli)
		if err != nil || end != tc.end || found != tc.found {
			t.Errorf("timeline %d: %s, %v, %v; want %s, %v", tc.tli, end, found, err, tc.end, tc.found)
		}
	}
}
