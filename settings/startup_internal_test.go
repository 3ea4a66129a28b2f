package settings

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// The start-up line of a databases entry names the entry once (database) and its
// URLs under keys of their own: JSON with a key twice is read by most tools as the
// last value alone.
func TestStartupLineKeysAreUnique(t *testing.T) {
	s := New()
	s.Relay.DatabaseURL = "postgres://relay:secret@db:5432/orders"
	s.Relay.PrimaryURL = "postgres://relay:secret@primary:5432/orders"
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil)).With("database", "orders")
	s.logStartup(logger, s.Relay)
	line := buf.String()
	for key, want := range map[string]int{`"database":`: 1, `"database_url":`: 1, `"primary_url":`: 1} {
		if got := strings.Count(line, key); got != want {
			t.Errorf("%s appears %d times, want %d: %s", key, got, want, line)
		}
	}
	if strings.Contains(line, "secret") {
		t.Errorf("the line shows a password: %s", line)
	}
}
