package poller

import (
	"log/slog"

	"github.com/walrelay/walrelay/outbox"
)

// DeadLettered is a row given up on: its failed attempt was the last the policy
// allows (Policy.MaxAttempts), so no one retries it until an operator does
// (walrelay dlq retry).
type DeadLettered struct {
	Event    *outbox.Event
	Table    string // schema-qualified
	Attempts int
	Err      error // the last attempt's
}

// log writes the one ERROR line every dead letter gets.
func (d DeadLettered) log(log *slog.Logger) {
	log.Error("event dead-lettered after its last attempt; it is not retried until `walrelay dlq retry`",
		"event_id", d.Event.ID, "table", d.Table, "event_type", d.Event.EventType, "aggregate_id", d.Event.AggregateID,
		"attempts", d.Attempts, "err", d.Err)
}
