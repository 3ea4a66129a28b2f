package suggest_test

import (
	"testing"

	"github.com/walrelay/walrelay/internal/suggest"
)

func TestNearest(t *testing.T) {
	names := []string{"slot", "publication", "kafka-brokers", "status-interval", "stats-interval"}
	for in, want := range map[string]string{"slott": "slot", "publicaton": "publication", "kafka-broker": "kafka-brokers",
		"status-intervall": "status-interval", "xyz": "", "database": ""} {
		if got := suggest.Nearest(in, names); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", in, got, want)
		}
	}
}
