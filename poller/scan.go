package poller

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/outbox"
)

// ErrNullID is the reason a row whose id column is NULL (an adopted table may allow
// it) is unpublishable: its event would have no id, and no bookkeeping could find it.
var ErrNullID = errors.New("is NULL: an event needs its id")

// column is one text column of an event row as read: its value, or NULL.
type column struct {
	value string
	null  bool
}

// ScanEvent reads one row selected with EventColumns (plus extra columns into
// extra); cols names the columns in its errors and places its header, partition and
// trace columns as the decoder does. A row that can never become an event (a NULL
// required column, a created_at that is not a finite timestamp) comes back with
// unpublishable set to the reason (ErrNullID for a NULL id); err is for failures to
// read at all. A NULL payload is an event with NullPayload set.
func ScanEvent(row pgx.Row, shape catalog.Shape, extra ...any) (ev outbox.Event, unpublishable error, err error) {
	cols := shape.Columns
	// id, aggregate type, aggregate id, event type, the placed columns: the payload
	// and created_at are read apart.
	n := 4 + len(cols.Headers) + len(cols.Envelope)
	if cols.Partition != "" {
		n++
	}
	if cols.Trace != "" {
		n++
	}
	var buf [12]column
	texts := buf[:0]
	if n > len(buf) {
		texts = make([]column, 0, n)
	}
	var payload []byte
	var created pgtype.Timestamptz
	raw, ok := row.(rawRow)
	if ok {
		texts, ok, err = readRaw(raw, n, texts, &payload, &created, extra)
	}
	if !ok && err == nil {
		texts, err = scanText(row, n, texts, &payload, &created, extra)
	}
	if err != nil {
		return ev, nil, err
	}
	placed := texts[4:]
	headers := placed[:len(cols.Headers)]
	placed = placed[len(cols.Headers):]
	if cols.Partition != "" {
		if !placed[0].null {
			ev.Partition = placed[0].value
		}
		placed = placed[1:]
	}
	var trace *column
	if cols.Trace != "" {
		trace, placed = &placed[0], placed[1:]
	}
	ev.Headers = placedHeaders(shape, headers, trace)
	for i, v := range placed {
		ev.Envelope = append(ev.Envelope, outbox.Field{Key: cols.Envelope[i].Key(), Value: v.value, Null: v.null})
	}
	if texts[0].null {
		return ev, fmt.Errorf("outbox row: column %s %w", cols.ID, ErrNullID), nil
	}
	ev.ID = texts[0].value
	for i, name := range [...]string{cols.AggregateType, cols.AggregateID, cols.EventType} {
		if texts[1+i].null {
			return ev, fmt.Errorf("outbox row %s: column %s is NULL", ev.ID, name), nil
		}
	}
	ev.AggregateType, ev.AggregateID, ev.EventType = texts[1].value, texts[2].value, texts[3].value
	if payload == nil {
		ev.NullPayload = true // published as a null value (a tombstone)
	} else {
		ev.Payload = payload
	}
	if !created.Valid || created.InfinityModifier != pgtype.Finite {
		return ev, fmt.Errorf("outbox row %s: column %s is not a finite timestamp", ev.ID, cols.CreatedAt), nil
	}
	ev.CreatedAt = created.Time
	return ev, nil, nil
}

// rawRow is a row of pgx's that also gives its columns as received.
type rawRow interface {
	RawValues() [][]byte
	FieldDescriptions() []pgconn.FieldDescription
	Conn() *pgx.Conn
}

// readRaw reads the text columns and the payload straight from the bytes pgx
// received, which for text (and for bytea sent in binary) are the value itself, and
// created_at and extra through the connection's type map, with none of the
// reflection Scan spends on each nullable column. ok is false when a column is of
// another type; Scan then reads the row.
func readRaw(row rawRow, n int, texts []column, payload *[]byte, created *pgtype.Timestamptz, extra []any) (_ []column, ok bool, err error) {
	raw, fields, conn := row.RawValues(), row.FieldDescriptions(), row.Conn()
	if len(raw) != n+2+len(extra) || len(fields) != len(raw) || conn == nil {
		return texts, false, nil
	}
	for i, f := range fields[:n+2] {
		plain := f.DataTypeOID == pgtype.TextOID || f.DataTypeOID == pgtype.ByteaOID && f.Format == pgtype.BinaryFormatCode
		if i != 5 && !plain { // column 5 is created_at
			return texts, false, nil
		}
	}
	text := func(b []byte) column { return column{value: string(b), null: b == nil} }
	texts = append(texts, text(raw[0]), text(raw[1]), text(raw[2]), text(raw[3]))
	for _, b := range raw[6 : n+2] {
		texts = append(texts, text(b))
	}
	*payload = bytes.Clone(raw[4]) // nil stays nil: a NULL payload
	m := conn.TypeMap()
	scan := func(i int, dst any) error {
		if err := m.Scan(fields[i].DataTypeOID, fields[i].Format, raw[i], dst); err != nil {
			return fmt.Errorf("column %s: %w", fields[i].Name, err)
		}
		return nil
	}
	if err := scan(5, created); err != nil {
		return texts, false, err
	}
	for i, dst := range extra {
		if err := scan(n+2+i, dst); err != nil {
			return texts, false, err
		}
	}
	return texts, true, nil
}

// scanText reads the row through Scan, NULLs as nil pointers.
func scanText(row pgx.Row, n int, texts []column, payload *[]byte, created *pgtype.Timestamptz, extra []any) ([]column, error) {
	vals := make([]*string, n)
	dest := []any{&vals[0], &vals[1], &vals[2], &vals[3], payload, created}
	for i := range vals[4:] {
		dest = append(dest, &vals[4+i])
	}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return texts, err
	}
	for _, v := range vals {
		c := column{null: v == nil}
		if v != nil {
			c.value = *v
		}
		texts = append(texts, c)
	}
	return texts, nil
}

// placedHeaders are the header columns' headers, NULL ones marked Null, then the trace
// context's; nil when there are none.
func placedHeaders(shape catalog.Shape, values []column, trace *column) []outbox.Header {
	var hs []outbox.Header
	for i, v := range values {
		h := shape.Columns.Headers[i]
		hs = append(hs, outbox.Header{Key: h.Key(), Type: shape.PlacedTypes[h.Column], Value: v.value, Null: v.null})
	}
	if trace != nil && !trace.null {
		hs = outbox.AppendTraceHeaders(hs, trace.value)
	}
	return hs
}
