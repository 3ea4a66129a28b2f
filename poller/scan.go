package poller

import (
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/walrelay/walrelay/outbox"
)

// EventColumns is the select list ScanEvent reads, in order.
const EventColumns = "id::text, aggregate_type::text, aggregate_id::text, event_type::text, payload::text, created_at"

// ScanEvent reads one row selected with EventColumns (plus extra columns into
// extra). A row that can never become an event (a NULL required column, a created_at
// that is not a finite timestamp) comes back with unpublishable set to the reason; err
// is for failures to read at all.
func ScanEvent(row pgx.Row, extra ...any) (ev outbox.Event, unpublishable error, err error) {
	var id, aggType, aggID, eventType, payload *string
	var created pgtype.Timestamptz
	if err := row.Scan(append([]any{&id, &aggType, &aggID, &eventType, &payload, &created}, extra...)...); err != nil {
		return ev, nil, err
	}
	if id == nil {
		return ev, nil, fmt.Errorf("outbox row with a NULL id cannot be addressed; fix it by hand")
	}
	ev.ID = *id
	for _, c := range []struct {
		name string
		v    *string
		dst  *string
	}{{"aggregate_type", aggType, &ev.AggregateType}, {"aggregate_id", aggID, &ev.AggregateID}, {"event_type", eventType, &ev.EventType}} {
		if c.v == nil {
			return ev, fmt.Errorf("outbox row %s: column %s is NULL", ev.ID, c.name), nil
		}
		*c.dst = *c.v
	}
	if payload == nil {
		return ev, fmt.Errorf("outbox row %s: column payload is NULL", ev.ID), nil
	}
	ev.Payload = []byte(*payload)
	if !created.Valid || created.InfinityModifier != pgtype.Finite {
		return ev, fmt.Errorf("outbox row %s: column created_at is not a finite timestamp", ev.ID), nil
	}
	ev.CreatedAt = created.Time
	return ev, nil, nil
}
