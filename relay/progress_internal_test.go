package relay

import (
	"testing"
	"time"

	"github.com/walrelay/walrelay/catalog"
)

// A horizon that moved only past the transaction that recorded the last one is not
// recorded again (an idle relay writes nothing); one that moved past any other
// transaction is.
func TestProgressSkipsOnlyItsOwnTransaction(t *testing.T) {
	cases := []struct {
		name               string
		recorded, by, next uint64
		skip               bool
	}{
		{"nothing recorded yet", 0, 0, 1, false},
		{"only the recorder's own transaction since", 100, 100, 101, true},
		{"another transaction after the recorder's", 100, 100, 102, false},
		{"others before the recorder's transaction", 100, 105, 106, false},
		{"the recorder's transaction still running", 100, 100, 100, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &progress{recorded: c.recorded, by: c.by}
			if got := p.onlyOwn(catalog.Published{XID: c.next}); got != c.skip {
				t.Errorf("onlyOwn(recorded %d by %d, candidate %d) = %v, want %v", c.recorded, c.by, c.next, got, c.skip)
			}
		})
	}
}

// A horizon that would move past no transaction the stream received rows from waits,
// at most recordAtLeast; one that covers a newer row's transaction (in xid order,
// across wraparound), a row of unknown xid, or the session's first is recorded.
func TestProgressWaitsWhileItCoversNoNewRows(t *testing.T) {
	now := time.Now()
	cases := []struct {
		name       string
		recorded   uint64
		recordedAt time.Time
		rows       []uint32 // noted xids
		wait       bool
	}{
		{"first record of the session", 0, time.Time{}, nil, false},
		{"no rows since the start", 100, now, nil, true},
		{"rows all below the recorded horizon", 100, now, []uint32{90, 99}, true},
		{"a row at the recorded horizon", 100, now, []uint32{90, 100}, false},
		{"a newer row noted before an older one", 100, now, []uint32{150, 99}, false},
		{"a row past a wraparound", 1<<32 + 5, now, []uint32{1<<32 - 10, 7}, false},
		{"rows below, across a wraparound", 1<<32 + 5, now, []uint32{1<<32 - 10, 2}, true},
		{"a row of unknown xid", 100, now, []uint32{0, 50}, false},
		{"the last record a minute old", 100, now.Add(-recordAtLeast), []uint32{50}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &progress{recorded: c.recorded, recordedAt: c.recordedAt}
			for _, xid := range c.rows {
				p.rows.note(xid)
			}
			if got := p.coversNoNewRows(); got != c.wait {
				t.Errorf("coversNoNewRows(recorded %d, rows %v) = %v, want %v", c.recorded, c.rows, got, c.wait)
			}
		})
	}
}
