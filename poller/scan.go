package poller

import (
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/walrelay/walrelay/outbox"
)

// ScanEvent reads one row selected with EventColumns (plus extra columns into
// extra); cols names the columns in its errors. A row that can never become an event
// (a NULL required column, a created_at that is not a finite timestamp) comes back
// with unpublishable set to the reason; err is for failures to read at all.
func ScanEvent(row pgx.Row, cols outbox.Columns, extra ...any) (ev outbox.Event, unpublishable error, err error) {
	var id, aggType, aggID, eventType *string
	var payload *[]byte
	var created pgtype.Timestamptz
	if err := row.Scan(append([]any{&id, &aggType, &aggID, &eventType, &payload, &created}, extra...)...); err != nil {
		return ev, nil, err
	}
	if id == nil {
		return ev, nil, fmt.Errorf("outbox row with a NULL %s cannot be addressed; fix it by hand", cols.ID)
	}
	ev.ID = *id
	for _, c := range []struct {
		name string
		v    *string
		dst  *string
	}{{cols.AggregateType, aggType, &ev.AggregateType}, {cols.AggregateID, aggID, &ev.AggregateID}, {cols.EventType, eventType, &ev.EventType}} {
		if c.v == nil {
			return ev, fmt.Errorf("outbox row %s: column %s is NULL", ev.ID, c.name), nil
		}
		*c.dst = *c.v
	}
	if payload == nil {
		return ev, fmt.Errorf("outbox row %s: column %s is NULL", ev.ID, cols.Payload), nil
	}
	ev.Payload = *payload
	if !created.Valid || created.InfinityModifier != pgtype.Finite {
		return ev, fmt.Errorf("outbox row %s: column %s is not a finite timestamp", ev.ID, cols.CreatedAt), nil
	}
	ev.CreatedAt = created.Time
	return ev, nil, nil
}
