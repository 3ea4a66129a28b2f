package poller

import (
	"github.com/walrelay/walrelay/outbox"

	"github.com/walrelay/walrelay/catalog"
)

// An event whose row is gone (the application deleted it, --on-publish none) or
// never existed (a table-less event) gets a row when the poller takes it over. That
// row carries the placed columns too, filled from the event's headers and partition,
// so that the poller publishes the headers and partition the stream would have.

// rewritten is a placed column written back from the event.
type rewritten struct {
	name  string // quoted
	typ   string // format_type, which the text value is cast to
	value func(e *outbox.Event) any
}

// rewrittenColumns are the shape's placed columns (header, partition and trace
// columns) in the order of Columns.Placed. A column the row writes anyway (a core
// column also placed as a header, as in Debezium's type:header:eventType) or of
// unknown type is left out, and so is a column placed twice after its first place.
func rewrittenColumns(shape catalog.Shape) []rewritten {
	c := shape.Columns
	written := map[string]bool{c.ID: true, c.AggregateType: true, c.AggregateID: true, c.EventType: true, c.Payload: true}
	if c.CreatedAt != "" {
		written[c.CreatedAt] = true
	}
	var out []rewritten
	add := func(col string, value func(*outbox.Event) any) {
		typ, ok := shape.PlacedTypes[col]
		if !ok || written[col] {
			return
		}
		written[col] = true
		out = append(out, rewritten{name: ident(col), typ: typ, value: value})
	}
	for _, h := range c.Headers {
		key := h.Key()
		add(h.Column, func(e *outbox.Event) any {
			if v, ok := header(e.Headers, key); ok {
				return v
			}
			return nil // the column was NULL: no header
		})
	}
	if c.Partition != "" {
		add(c.Partition, func(e *outbox.Event) any { return nullIfEmpty(e.Partition) })
	}
	if c.Trace != "" {
		add(c.Trace, func(e *outbox.Event) any {
			parent, _ := header(e.Headers, outbox.TraceParentHeader)
			state, _ := header(e.Headers, outbox.TraceStateHeader)
			return nullIfEmpty(outbox.TraceColumnContent(parent, state))
		})
	}
	for _, f := range c.Envelope {
		key := f.Key()
		add(f.Column, func(e *outbox.Event) any {
			for _, ef := range e.Envelope {
				if ef.Key == key && !ef.Null {
					return ef.Value
				}
			}
			return nil
		})
	}
	return out
}

// header is the value of the first header with key.
func header(hs []outbox.Header, key string) (string, bool) {
	for _, h := range hs {
		if h.Key == key {
			return h.Value, !h.Null
		}
	}
	return "", false
}

// nullIfEmpty is v, or NULL for "": no partition, no trace context.
func nullIfEmpty(v string) any {
	if v == "" {
		return nil
	}
	return v
}
