package decoder_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/outbox"
)

const (
	oidInt4    = 23
	oidNumeric = 1700
	oidBool    = 16
)

// placedCols is Debezium's table with the columns a router places: a tenant and a
// region as headers, a partition column, the trace context, and columns of other
// types as headers.
var placedCols = append(slices.Clone(debeziumCols[:5]),
	relCol{name: "tenant_id", typ: oidText, typmod: -1},
	relCol{name: "region", typ: oidVarchar, typmod: 259},
	relCol{name: "part", typ: oidInt4, typmod: -1},
	relCol{name: "tracingspancontext", typ: oidText, typmod: -1},
	relCol{name: "amount", typ: oidNumeric, typmod: -1},
	relCol{name: "flag", typ: oidBool, typmod: -1},
	relCol{name: "blob", typ: oidBytea, typmod: -1},
	relCol{name: "at", typ: oidTimestamptz, typmod: -1},
)

var placedNames = func() outbox.Columns {
	c := debeziumNames
	c.Headers = []outbox.HeaderColumn{{Column: "tenant_id", Header: "tenant"}, {Column: "region"},
		{Column: "type", Header: "eventType"}, {Column: "amount"}, {Column: "flag"}, {Column: "blob"}, {Column: "at"}}
	c.Partition = "part"
	c.Trace = "tracingspancontext"
	return c
}()

const traceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

func placedRow() row {
	return row{"id": text(testID), "aggregatetype": text("order"), "aggregateid": text("ord-1"),
		"type": text("order.placed"), "payload": text(testPayload), "tenant_id": text("acme"),
		"region": text("eu-west"), "part": text("2"), "tracingspancontext": text(traceParent),
		"amount": text("12.50"), "flag": text("t"), "blob": text(`\x00ff`), "at": text("2026-11-29 19:31:48.5+00")}
}

// Placed columns become headers in the configured order, each value the text
// PostgreSQL sends for its type, with the type where a record format writes it
// otherwise (outbox.Header.Type); the partition column's text and the trace
// context's headers come along; a column can be both an event field and a header.
func TestDecodePlacedColumns(t *testing.T) {
	d := mappedDecoder(t, placedCols, placedNames)
	var m decoder.Message
	if err := d.Decode(insertMsg(outboxOID, placedRow().vals(placedCols)), &m); err != nil {
		t.Fatal(err)
	}
	want := []outbox.Header{{Key: "tenant", Value: "acme"}, {Key: "region", Value: "eu-west"},
		{Key: "eventType", Value: "order.placed"}, {Key: "amount", Value: "12.50", Type: "numeric"}, {Key: "flag", Value: "t", Type: "boolean"},
		{Key: "blob", Value: `\x00ff`}, {Key: "at", Value: "2026-11-29 19:31:48.5+00", Type: "timestamp with time zone"},
		{Key: "traceparent", Value: traceParent}}
	if !slices.Equal(m.Event.Headers, want) {
		t.Errorf("headers %v\nwant    %v", m.Event.Headers, want)
	}
	if m.Event.Partition != "2" || m.Event.EventType != "order.placed" || string(m.Event.Payload) != testPayload {
		t.Errorf("partition %q, event type %q, payload %q", m.Event.Partition, m.Event.EventType, m.Event.Payload)
	}
	wantSize := len(testID) + len("order") + len("ord-1") + len("order.placed") + len(testPayload) + len("2")
	for _, h := range want {
		wantSize += len(h.Key) + len(h.Value)
	}
	if m.Event.Size() != wantSize {
		t.Errorf("Size %d, want %d (headers and partition counted)", m.Event.Size(), wantSize)
	}
}

// NULL leaves a header out and the partition to the key; Debezium's serialized span
// context gives traceparent and tracestate; content that is no trace context gives
// no trace headers and the event is still published.
func TestDecodePlacedNullsAndTraceForms(t *testing.T) {
	cases := []struct {
		name, trace string
		want        []outbox.Header
	}{
		{"properties", "#Mon Nov 30 10:00:00 UTC 2026\ntraceparent=" + traceParent + "\ntracestate=rojo\\=00f067aa0ba902b7,congo\\=t61rcWkgMzE\n",
			[]outbox.Header{{Key: "traceparent", Value: traceParent}, {Key: "tracestate", Value: "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"}}},
		{"not a trace context", "hello", nil},
		{"all-zero trace id", "00-00000000000000000000000000000000-b7ad6b7169203331-01", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := mappedDecoder(t, placedCols, placedNames)
			r := placedRow().with("tenant_id", null).with("part", null).with("tracingspancontext", text(tc.trace))
			for _, c := range []string{"region", "amount", "flag", "blob", "at"} {
				r = r.with(c, null)
			}
			var m decoder.Message
			if err := d.Decode(insertMsg(outboxOID, r.vals(placedCols)), &m); err != nil {
				t.Fatal(err)
			}
			// NULL header columns are headers marked Null, which only Kafka with
			// Debezium's headers writes (record.Format.HeaderValue).
			want := append([]outbox.Header{{Key: "tenant", Null: true}, {Key: "region", Null: true},
				{Key: "eventType", Value: "order.placed"}, {Key: "amount", Type: "numeric", Null: true},
				{Key: "flag", Type: "boolean", Null: true}, {Key: "blob", Null: true},
				{Key: "at", Type: "timestamp with time zone", Null: true}}, tc.want...)
			if !slices.Equal(m.Event.Headers, want) || m.Event.Partition != "" {
				t.Errorf("headers %v partition %q, want %v and none", m.Event.Headers, m.Event.Partition, want)
			}
		})
	}
}

// A table without the trace column is read without it; one without a placed
// header or partition column is a schema error naming it.
func TestDecodePlacedColumnMissing(t *testing.T) {
	withoutTrace := slices.DeleteFunc(slices.Clone(placedCols), func(c relCol) bool { return c.name == "tracingspancontext" })
	d := mappedDecoder(t, withoutTrace, placedNames)
	var m decoder.Message
	if err := d.Decode(insertMsg(outboxOID, placedRow().vals(withoutTrace)), &m); err != nil || len(m.Event.Headers) != 7 {
		t.Fatalf("without the trace column: err %v, headers %v", err, m.Event.Headers)
	}
	withoutTenant := slices.DeleteFunc(slices.Clone(placedCols), func(c relCol) bool { return c.name == "tenant_id" })
	err := decoder.New("public", "outbox", placedNames).Decode(relationMsg(outboxOID, "public", "outbox", withoutTenant), &m)
	if se, ok := errors.AsType[*decoder.SchemaError](err); !ok || se.Column != "tenant_id" {
		t.Fatalf("relation without tenant_id: %v, want a SchemaError naming it", err)
	}
}

// A NULL payload is an event with NullPayload set and no payload, not a row error.
func TestDecodeNullPayload(t *testing.T) {
	for _, cols := range [][]relCol{debeziumCols, typedCols} {
		names := debeziumNames
		r := row{"id": text(testID), "aggregatetype": text("order"), "aggregateid": text("ord-1"),
			"type": text("order.placed"), "payload": null}
		if cols[0].typ == oidInt8 {
			names = outbox.DefaultColumns()
			r = row{"id": text("7"), "aggregate_type": text("order"), "aggregate_id": text("ord-1"),
				"event_type": text("order.placed"), "payload": null, "created_at": text("2026-11-29 19:31:48")}
		}
		d := mappedDecoder(t, cols, names)
		var m decoder.Message
		if err := d.Decode(insertMsg(outboxOID, r.vals(cols)), &m); err != nil {
			t.Fatal(err)
		}
		if m.Kind != decoder.KindInsert || !m.Event.NullPayload || m.Event.Payload != nil {
			t.Errorf("payload type %d: kind %v, NullPayload %v, payload %q", cols[4].typ, m.Kind, m.Event.NullPayload, m.Event.Payload)
		}
	}
}

// Placed columns cost the event its headers slice and nothing else.
func TestDecodePlacedAllocs(t *testing.T) {
	d := mappedDecoder(t, placedCols, placedNames)
	msg := insertMsg(outboxOID, placedRow().vals(placedCols))
	var m decoder.Message
	allocs := testing.AllocsPerRun(200, func() {
		if err := d.Decode(msg, &m); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("%v allocations per insert with placed columns, want at most 1", allocs)
	}
}
