package relay

import (
	"testing"

	"github.com/walrelay/walrelay/replication"
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
			if got := p.onlyOwn(replication.Published{XID: c.next}); got != c.skip {
				t.Errorf("onlyOwn(recorded %d by %d, candidate %d) = %v, want %v", c.recorded, c.by, c.next, got, c.skip)
			}
		})
	}
}
