package relay

import (
	"testing"

	"github.com/jackc/pglogrepl"
)

func TestEventConfirmations(t *testing.T) {
	type step struct {
		lsn, settled pglogrepl.LSN
		want         bool
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"a confirmation reaching the newest event end passes events once", []step{
			{lsn: 100, settled: 100, want: true},
			{lsn: 100, settled: 100, want: false},
			{lsn: 150, settled: 100, want: false}, // the server's position: no events
		}},
		{"steady load, every confirmation one check behind the newest event end", []step{
			// The watermark's newest settled event end is always past the confirmation
			// the check allows; each confirmation still passes events.
			{lsn: 100, settled: 110, want: false},
			{lsn: 110, settled: 120, want: true},
			{lsn: 120, settled: 130, want: true},
			{lsn: 130, settled: 140, want: true},
			{lsn: 140, settled: 140, want: true},
			{lsn: 160, settled: 140, want: false},
		}},
		{"a confirmation short of the owed end waits for the one that reaches it", []step{
			{lsn: 100, settled: 200, want: false},
			{lsn: 150, settled: 300, want: false},
			{lsn: 200, settled: 300, want: true},
			{lsn: 250, settled: 300, want: false},
			{lsn: 300, settled: 300, want: true},
		}},
		{"nothing settled yet", []step{
			{lsn: 100, settled: 0, want: false},
			{lsn: 200, settled: 0, want: false},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c eventConfirmations
			for i, s := range tc.steps {
				if got := c.confirmed(s.lsn, s.settled); got != s.want {
					t.Fatalf("step %d: confirmed(%d, settled %d) = %v, want %v", i, s.lsn, s.settled, got, s.want)
				}
			}
		})
	}
}
