package poller

import (
	"log/slog"

	"github.com/walrelay/walrelay/outbox"
)

// DeadLettered is a row given up on: its failed attempt was the last the policy
// allows (Policy.MaxAttempts), or the broker refused it in a way no retry can fix
// (sink.IsFinal: too large, say), so no one retries it until an operator does
// (walrelay dlq retry).
type DeadLettered struct {
	Event    *outbox.Event
	Table    string // schema-qualified
	Attempts int
	Err      error // the last attempt's
	// Final: the last error is one no retry can fix; the attempts left were not made.
	Final bool
}

// log writes the one ERROR line every dead letter gets.
func (d DeadLettered) log(log *slog.Logger) {
	msg := "event dead-lettered after its last attempt; it is not retried until `walrelay dlq retry`"
	if d.Final {
		msg = "event dead-lettered at once: the broker refuses it whatever the attempt; fix the cause, then `walrelay dlq retry`"
	}
	log.Error(msg, "event_id", d.Event.ID, "table", d.Table, "event_type", d.Event.EventType,
		"aggregate_id", d.Event.AggregateID, "attempts", d.Attempts, "err", d.Err)
}
