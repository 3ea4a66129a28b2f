package replication

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// SenderTimeout returns the server's wal_sender_timeout for this connection (0: none).
func (c *Conn) SenderTimeout(ctx context.Context) (time.Duration, error) {
	results, err := c.pg.Exec(ctx, "SHOW wal_sender_timeout").ReadAll()
	if err != nil {
		return 0, fmt.Errorf("read wal_sender_timeout: %w", err)
	}
	if len(results) != 1 || len(results[0].Rows) != 1 || len(results[0].Rows[0]) != 1 {
		return 0, errors.New("read wal_sender_timeout: unexpected result")
	}
	return parsePGDuration(string(results[0].Rows[0][0]))
}

// parsePGDuration parses a duration GUC as SHOW prints it: "60s", "500ms", "1min", "0".
func parsePGDuration(s string) (time.Duration, error) {
	units := []struct {
		suffix string
		unit   time.Duration
	}{{"ms", time.Millisecond}, {"min", time.Minute}, {"s", time.Second}, {"h", time.Hour}, {"d", 24 * time.Hour}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			var n int64
			if _, err := fmt.Sscanf(num, "%d", &n); err != nil {
				return 0, fmt.Errorf("parse duration %q: %w", s, err)
			}
			return time.Duration(n) * u.unit, nil
		}
	}
	var n int64
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil {
		return 0, fmt.Errorf("parse duration %q: %w", s, err)
	}
	return time.Duration(n) * time.Millisecond, nil
}
