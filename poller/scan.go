package poller

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/walrelay/walrelay/outbox"
)

// ErrNullID is the reason a row whose id column is NULL (an adopted table may allow
// it) is unpublishable: its event would have no id, and no bookkeeping could find it.
var ErrNullID = errors.New("is NULL: an event needs its id")

// ScanEvent reads one row selected with EventColumns (plus extra columns into
// extra); cols names the columns in its errors and places its header, partition and
// trace columns as the decoder does. A row that can never become an event (a NULL
// required column, a created_at that is not a finite timestamp) comes back with
// unpublishable set to the reason (ErrNullID for a NULL id); err is for failures to
// read at all. A NULL payload is an event with NullPayload set.
func ScanEvent(row pgx.Row, shape outbox.Shape, extra ...any) (ev outbox.Event, unpublishable error, err error) {
	cols := shape.Columns
	var id, aggType, aggID, eventType *string
	var payload *[]byte
	var created pgtype.Timestamptz
	dest := []any{&id, &aggType, &aggID, &eventType, &payload, &created}
	headers := make([]*string, len(cols.Headers))
	for i := range headers {
		dest = append(dest, &headers[i])
	}
	var partition, trace *string
	if cols.Partition != "" {
		dest = append(dest, &partition)
	}
	if cols.Trace != "" {
		dest = append(dest, &trace)
	}
	envelope := make([]*string, len(cols.Envelope))
	for i := range envelope {
		dest = append(dest, &envelope[i])
	}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return ev, nil, err
	}
	ev.Headers = placedHeaders(shape, headers, trace)
	for i, v := range envelope {
		f := outbox.Field{Key: cols.Envelope[i].Key(), Null: v == nil}
		if v != nil {
			f.Value = *v
		}
		ev.Envelope = append(ev.Envelope, f)
	}
	if partition != nil {
		ev.Partition = *partition
	}
	if id == nil {
		return ev, fmt.Errorf("outbox row: column %s %w", cols.ID, ErrNullID), nil
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
		ev.NullPayload = true // published as a null value (a tombstone)
	} else {
		ev.Payload = *payload
	}
	if !created.Valid || created.InfinityModifier != pgtype.Finite {
		return ev, fmt.Errorf("outbox row %s: column %s is not a finite timestamp", ev.ID, cols.CreatedAt), nil
	}
	ev.CreatedAt = created.Time
	return ev, nil, nil
}

// placedHeaders are the header columns' headers, NULL ones marked Null, then the trace
// context's; nil when there are none.
func placedHeaders(shape outbox.Shape, values []*string, trace *string) []outbox.Header {
	var hs []outbox.Header
	for i, v := range values {
		h := shape.Columns.Headers[i]
		oh := outbox.Header{Key: h.Key(), Type: shape.PlacedTypes[h.Column], Null: v == nil}
		if v != nil {
			oh.Value = *v
		}
		hs = append(hs, oh)
	}
	if trace != nil {
		hs = outbox.AppendTraceHeaders(hs, *trace)
	}
	return hs
}
