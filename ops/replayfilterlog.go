package ops

import (
	"log/slog"
	"time"
)

// maxLoggedIDs bounds the ids a log line names; the count is always said.
const maxLoggedIDs = 10

// LogValue shows the filter in a log line as the conditions it sets, times in UTC
// RFC 3339, so "replay started" reads as the request did rather than as a Go value.
func (f ReplayFilter) LogValue() slog.Value {
	var attrs []slog.Attr
	if !f.Since.IsZero() {
		attrs = append(attrs, slog.String("since", f.Since.UTC().Format(time.RFC3339Nano)))
	}
	if !f.Until.IsZero() {
		attrs = append(attrs, slog.String("until", f.Until.UTC().Format(time.RFC3339Nano)))
	}
	for _, a := range []struct{ key, value string }{
		{"aggregate_type", f.AggregateType}, {"aggregate_id", f.AggregateID}, {"event_type", f.EventType},
	} {
		if a.value != "" {
			attrs = append(attrs, slog.String(a.key, a.value))
		}
	}
	if len(f.IDs) > 0 {
		attrs = append(attrs, slog.Int("ids", len(f.IDs)), slog.Any("first_ids", f.IDs[:min(len(f.IDs), maxLoggedIDs)]))
	}
	if len(attrs) == 0 {
		return slog.StringValue("every row")
	}
	return slog.GroupValue(attrs...)
}
