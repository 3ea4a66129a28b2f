package record

import (
	"time"

	"github.com/walrelay/walrelay/outbox"
)

// Header is one record header. Values share the event's memory.
type Header struct {
	Key   string
	Value []byte
}

// OwnHeaders is how many headers walrelay sets itself, ahead of the event's own.
const OwnHeaders = 5

// CreatedLen is room enough for created_at in RFC 3339, UTC, with nanoseconds, in
// any year PostgreSQL stores (4713 BC to 294276 AD); a longer one is appended beyond
// it. The Kafka sink keeps it in every record in flight, so it is no larger.
const CreatedLen = len("294276-12-31T23:59:59.999999999Z")

// Own are walrelay's own headers of e, the first n of hs: id (the deduplication
// key), then, unless the format asks for the id alone as Debezium's router writes
// it, event_type (left out when the event has none: a table without the column),
// aggregate_type, aggregate_id and created_at (RFC 3339, UTC, written into created). The event's own headers (outbox.Event.Headers) follow them.
func (f *Format) Own(e *outbox.Event, created *[CreatedLen]byte) (hs [OwnHeaders]Header, n int) {
	if f.IDHeaderOnly {
		return [OwnHeaders]Header{{Key: "id", Value: bytesOf(e.ID)}}, 1
	}
	hs = [OwnHeaders]Header{
		{Key: "id", Value: bytesOf(e.ID)},
		{Key: "event_type", Value: bytesOf(e.EventType)},
		{Key: "aggregate_type", Value: bytesOf(e.AggregateType)},
		{Key: "aggregate_id", Value: bytesOf(e.AggregateID)},
		{Key: "created_at", Value: e.CreatedAt.UTC().AppendFormat(created[:0], time.RFC3339Nano)},
	}
	if e.EventType == "" { // no event type column: no event_type header
		copy(hs[1:], hs[2:])
		return hs, OwnHeaders - 1
	}
	return hs, OwnHeaders
}

// EachHeader calls fn with every header of e's record in order: walrelay's own
// (Own), then the event's placed ones (HeaderValue). A header with a null value
// (a NULL column under Debezium's headers) comes with a nil value; a broker
// without null header values writes it empty. For sinks whose messages take
// headers one at a time; the values may share e's memory.
func (f *Format) EachHeader(e *outbox.Event, fn func(key string, value []byte)) {
	var created [CreatedLen]byte
	own, n := f.Own(e, &created)
	for _, h := range own[:n] {
		fn(h.Key, h.Value)
	}
	for _, h := range e.Headers {
		if v, ok := f.HeaderValue(h); ok {
			fn(h.Key, v)
		}
	}
}
