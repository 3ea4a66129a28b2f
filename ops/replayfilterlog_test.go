package ops_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/ops"
)

// "replay started" names the filter's conditions, never a Go struct with a monotonic
// clock reading or a zero time.
func TestReplayFilterInALogLine(t *testing.T) {
	since := time.Now().Add(-30 * time.Minute) // carries a monotonic reading, as a parsed --since does
	cases := []struct {
		name   string
		filter ops.ReplayFilter
		want   []string
	}{
		{"since and type", ops.ReplayFilter{Since: since, EventType: "order.created"},
			[]string{"filter.since=" + since.UTC().Format(time.RFC3339Nano), "filter.event_type=order.created"}},
		{"ids", ops.ReplayFilter{IDs: []string{"a", "b"}}, []string{"filter.ids=2", `filter.first_ids="[a b]"`}},
		{"no condition", ops.ReplayFilter{}, []string{`filter="every row"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			slog.New(slog.NewTextHandler(&buf, nil)).Info("replay started", "filter", tc.filter)
			line := buf.String()
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("the line lacks %q:\n%s", w, line)
				}
			}
			for _, bad := range []string{"m=", "0001-01-01", "{"} {
				if strings.Contains(line, bad) {
					t.Errorf("the line shows %q, a Go value's rendering:\n%s", bad, line)
				}
			}
		})
	}
}
