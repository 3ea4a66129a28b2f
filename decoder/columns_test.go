package decoder_test

import (
	"errors"
	"testing"
	"time"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/outbox"
)

const (
	oidBytea     = 17
	oidTimestamp = 1114
)

// debeziumCols is Debezium's outbox table: other names, no created_at.
var debeziumCols = []relCol{
	{name: "id", typ: oidUUID, typmod: -1, key: true},
	{name: "aggregatetype", typ: oidVarchar, typmod: 259},
	{name: "aggregateid", typ: oidVarchar, typmod: 259},
	{name: "type", typ: oidVarchar, typmod: 259},
	{name: "payload", typ: oidJSONB, typmod: -1},
	{name: "retry_after", typ: oidTimestamptz, typmod: -1},
}

var debeziumNames = outbox.Columns{ID: "id", AggregateType: "aggregatetype", AggregateID: "aggregateid",
	EventType: "type", Payload: "payload"}

func mappedDecoder(t testing.TB, cols []relCol, names outbox.Columns) *decoder.Decoder {
	t.Helper()
	d := decoder.New("public", "outbox", names)
	var m decoder.Message
	if err := d.Decode(relationMsg(outboxOID, "public", "outbox", cols), &m); err != nil || m.Kind != decoder.KindRelation {
		t.Fatalf("decode relation: kind %v, err %v", m.Kind, err)
	}
	return d
}

// The decoder reads columns by the names it was given; without a created_at
// column the event's CreatedAt stays zero for the stream to fill with the commit time.
func TestDecodeMappedColumnsWithoutCreatedAt(t *testing.T) {
	d := mappedDecoder(t, debeziumCols, debeziumNames)
	r := row{"id": text(testID), "aggregatetype": text("order"), "aggregateid": text("ord-1"),
		"type": text("order.placed"), "payload": text(testPayload)}
	var m decoder.Message
	if err := d.Decode(insertMsg(outboxOID, r.vals(debeziumCols)), &m); err != nil {
		t.Fatal(err)
	}
	want := outbox.Event{ID: testID, AggregateType: "order", AggregateID: "ord-1", EventType: "order.placed",
		Payload: []byte(testPayload)}
	if m.Kind != decoder.KindInsert || diffEvent(m.Event, want) != "" {
		t.Fatalf("kind %v: %s", m.Kind, diffEvent(m.Event, want))
	}
	// A table that lacks a mapped column is a schema error naming it.
	err := decoder.New("public", "outbox", outbox.DefaultColumns()).Decode(relationMsg(outboxOID, "public", "outbox", debeziumCols), &m)
	if se, ok := err.(*decoder.SchemaError); !ok || se.Column != "aggregate_type" {
		t.Fatalf("relation without the default columns: %v, want a SchemaError for aggregate_type", err)
	}
}

var typedCols = []relCol{
	{name: "id", typ: oidInt8, typmod: -1, key: true},
	{name: "aggregate_type", typ: oidText, typmod: -1},
	{name: "aggregate_id", typ: oidText, typmod: -1},
	{name: "event_type", typ: oidText, typmod: -1},
	{name: "payload", typ: oidBytea, typmod: -1},
	{name: "created_at", typ: oidTimestamp, typmod: -1},
}

// A bytea payload arrives as hex text and is published as its bytes; a timestamp
// without time zone is read as UTC; a bigint id is its decimal text.
func TestDecodeByteaPayloadAndTimestamp(t *testing.T) {
	d := mappedDecoder(t, typedCols, outbox.DefaultColumns())
	r := row{"id": text("42"), "aggregate_type": text("order"), "aggregate_id": text("ord-1"),
		"event_type": text("order.placed"), "payload": text(`\x00ff10415a`), "created_at": text("2026-11-29 19:31:48.5")}
	var m decoder.Message
	if err := d.Decode(insertMsg(outboxOID, r.vals(typedCols)), &m); err != nil {
		t.Fatal(err)
	}
	want := outbox.Event{ID: "42", AggregateType: "order", AggregateID: "ord-1", EventType: "order.placed",
		Payload: []byte{0x00, 0xff, 0x10, 'A', 'Z'}, CreatedAt: time.Date(2026, 11, 29, 19, 31, 48, 500000000, time.UTC)}
	if diffEvent(m.Event, want) != "" {
		t.Fatal(diffEvent(m.Event, want))
	}
	msg := insertMsg(outboxOID, r.vals(typedCols))
	if allocs := testing.AllocsPerRun(1000, func() { _ = d.Decode(msg, &m) }); allocs != 0 {
		t.Errorf("%v allocations per decoded bytea insert, want 0", allocs)
	}

	for _, bad := range []string{`00ff`, `\x0g`, `\x0`} {
		err := d.Decode(insertMsg(outboxOID, r.with("payload", text(bad)).vals(typedCols)), &m)
		if re, ok := err.(*decoder.RowError); !ok || re.Column != "payload" || re.ID != "42" {
			t.Errorf("payload %q: %v, want a RowError for payload of row 42", bad, err)
		}
	}
	err := d.Decode(insertMsg(outboxOID, r.with("created_at", text("2026-11-29 19:31:48+00")).vals(typedCols)), &m)
	if re, ok := err.(*decoder.RowError); !ok || re.Column != "created_at" {
		t.Errorf("timestamp with an offset in a timestamp column: %v, want a RowError", err)
	}
}

// One decoder reads several outbox tables, each by its own column names, and says
// which table each insert is for.
func TestDecodeSeveralTables(t *testing.T) {
	const tenantOID = outboxOID + 1
	d := decoder.NewTables([]decoder.Table{
		{Schema: "public", Name: "outbox", Columns: outbox.DefaultColumns()},
		{Schema: "tenant_b", Name: "outbox", Columns: debeziumNames},
	})
	var m decoder.Message
	for _, rel := range [][]byte{
		relationMsg(tenantOID, "tenant_b", "outbox", debeziumCols),
		relationMsg(outboxOID, "public", "outbox", defaultCols),
	} {
		if err := d.Decode(rel, &m); err != nil || m.Kind != decoder.KindRelation {
			t.Fatalf("decode relation: kind %v, err %v", m.Kind, err)
		}
	}
	// A table of the same name in another schema is not one of them.
	if err := d.Decode(relationMsg(outboxOID+2, "tenant_c", "outbox", debeziumCols), &m); err != nil || m.Kind != decoder.KindSkip {
		t.Fatalf("relation of another schema: kind %v, err %v, want skip", m.Kind, err)
	}
	b := row{"id": text(testID), "aggregatetype": text("invoice"), "aggregateid": text("inv-1"),
		"type": text("invoice.sent"), "payload": text(testPayload)}
	if err := d.Decode(insertMsg(tenantOID, b.vals(debeziumCols)), &m); err != nil {
		t.Fatal(err)
	}
	if m.Kind != decoder.KindInsert || m.Table != 1 || m.Event.AggregateType != "invoice" || m.Event.EventType != "invoice.sent" {
		t.Fatalf("insert into tenant_b.outbox: kind %v, table %d, event %+v; want an insert of table 1", m.Kind, m.Table, m.Event)
	}
	a := row{"id": text(testID), "aggregate_type": text("order"), "aggregate_id": text("ord-1"),
		"event_type": text("order.placed"), "payload": text(testPayload), "created_at": text("2024-01-02 03:04:05+00")}
	if err := d.Decode(insertMsg(outboxOID, a.vals(defaultCols)), &m); err != nil {
		t.Fatal(err)
	}
	if m.Kind != decoder.KindInsert || m.Table != 0 {
		t.Fatalf("insert into public.outbox: kind %v, table %d; want an insert of table 0", m.Kind, m.Table)
	}
	// A row error names its table, and Message.Table says which one it is.
	b["aggregateid"] = null
	err := d.Decode(insertMsg(tenantOID, b.vals(debeziumCols)), &m)
	var rowErr *decoder.RowError
	if !errors.As(err, &rowErr) || rowErr.Table != "tenant_b.outbox" || m.Table != 1 {
		t.Fatalf("NULL aggregateid: %v (table %d), want a RowError for tenant_b.outbox and table 1", err, m.Table)
	}
}

// One column may fill several fields: Debezium's route.by.field may name the type
// column, so the aggregate type and the event type are both read from it, and the
// key may be the id column. Before, the second field counted as missing and the
// table failed with a SchemaError for a column it has.
func TestDecodeColumnFillingSeveralFields(t *testing.T) {
	names := debeziumNames
	names.AggregateType = "type"
	names.AggregateID = "id"
	d := mappedDecoder(t, debeziumCols, names)
	r := row{"id": text(testID), "aggregatetype": text("order"), "aggregateid": text("ord-1"),
		"type": text("order.placed"), "payload": text(testPayload)}
	var m decoder.Message
	if err := d.Decode(insertMsg(outboxOID, r.vals(debeziumCols)), &m); err != nil {
		t.Fatal(err)
	}
	want := outbox.Event{ID: testID, AggregateType: "order.placed", AggregateID: testID, EventType: "order.placed",
		Payload: []byte(testPayload)}
	if m.Kind != decoder.KindInsert || diffEvent(m.Event, want) != "" {
		t.Fatalf("kind %v: %s", m.Kind, diffEvent(m.Event, want))
	}
}
