package decoder_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/outbox"
)

const (
	outboxOID = 16390
	otherOID  = 16400
)

// defaultCols is the outbox table as walrelay migrate creates it.
var defaultCols = []relCol{
	{name: "id", typ: oidUUID, typmod: -1, key: true},
	{name: "aggregate_type", typ: oidVarchar, typmod: 259},
	{name: "aggregate_id", typ: oidText, typmod: -1},
	{name: "event_type", typ: oidVarchar, typmod: 259},
	{name: "payload", typ: oidJSONB, typmod: -1},
	{name: "created_at", typ: oidTimestamptz, typmod: -1},
}

func outboxRelation(cols []relCol) []byte {
	return relationMsg(outboxOID, "public", "outbox_events", cols)
}

// row holds column values by name; vals lays them out in relation order,
// with NULL for columns it does not name.
type row map[string]val

func (r row) vals(cols []relCol) []val {
	out := make([]val, len(cols))
	for i, c := range cols {
		v, ok := r[c.name]
		if !ok {
			v = null
		}
		out[i] = v
	}
	return out
}

func (r row) with(name string, v val) row {
	out := make(row, len(r)+1)
	for k, x := range r {
		out[k] = x
	}
	out[name] = v
	return out
}

const (
	testID      = "0b7e5c4a-3f1d-4e2b-9a8c-7d6e5f4a3b2c"
	testPayload = `{"total": 4200, "currency": "EUR", "lines": [{"sku": "A-1", "qty": 2}]}`
)

func goodRow() row {
	return row{
		"id":             text(testID),
		"aggregate_type": text("order"),
		"aggregate_id":   text("ord-81723"),
		"event_type":     text("order.placed"),
		"payload":        text(testPayload),
		"created_at":     text("2026-11-29 19:31:48.123456+00"),
	}
}

func goodEvent() outbox.Event {
	return outbox.Event{
		ID:            testID,
		AggregateType: "order",
		AggregateID:   "ord-81723",
		EventType:     "order.placed",
		Payload:       []byte(testPayload),
		CreatedAt:     time.Date(2026, 11, 29, 19, 31, 48, 123456000, time.UTC),
	}
}

// newDecoder returns a decoder that has seen a Relation message for the
// outbox table with cols.
func newDecoder(t testing.TB, cols []relCol) *decoder.Decoder {
	t.Helper()
	d := decoder.New("public", "outbox_events", outbox.DefaultColumns())
	var m decoder.Message
	if err := d.Decode(outboxRelation(cols), &m); err != nil {
		t.Fatalf("decode relation: %v", err)
	}
	if m.Kind != decoder.KindRelation {
		t.Fatalf("relation kind = %v, want relation", m.Kind)
	}
	return d
}

func diffEvent(got, want outbox.Event) string {
	var d []string
	if got.ID != want.ID {
		d = append(d, fmt.Sprintf("ID %q, want %q", got.ID, want.ID))
	}
	if got.AggregateType != want.AggregateType {
		d = append(d, fmt.Sprintf("AggregateType %q, want %q", got.AggregateType, want.AggregateType))
	}
	if got.AggregateID != want.AggregateID {
		d = append(d, fmt.Sprintf("AggregateID %q, want %q", got.AggregateID, want.AggregateID))
	}
	if got.EventType != want.EventType {
		d = append(d, fmt.Sprintf("EventType %q, want %q", got.EventType, want.EventType))
	}
	if !bytes.Equal(got.Payload, want.Payload) || (got.Payload == nil) != (want.Payload == nil) {
		d = append(d, fmt.Sprintf("Payload %q, want %q", got.Payload, want.Payload))
	}
	if !got.CreatedAt.Equal(want.CreatedAt) || got.CreatedAt.Location() != time.UTC {
		d = append(d, fmt.Sprintf("CreatedAt %v, want %v in UTC", got.CreatedAt, want.CreatedAt))
	}
	return strings.Join(d, "; ")
}

func TestDecodeBegin(t *testing.T) {
	cases := []struct {
		name   string
		lsn    uint64
		commit time.Time
		xid    uint32
	}{
		{"typical", 0x16B3748, time.Date(2026, 11, 29, 19, 31, 48, 123456000, time.UTC), 771},
		{"epoch", 0, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), 0},
		{"before epoch", 1, time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC), 1},
		{"max values", 1<<64 - 1, time.Date(2262, 4, 11, 0, 0, 0, 1000, time.UTC), 1<<32 - 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := decoder.New("public", "outbox_events", outbox.DefaultColumns())
			m := decoder.Message{Event: goodEvent(), EndLSN: 99} // stale fields must be cleared
			if err := d.Decode(beginMsg(tc.lsn, tc.commit, tc.xid), &m); err != nil {
				t.Fatal(err)
			}
			want := decoder.Message{Kind: decoder.KindBegin, FinalLSN: pglogrepl.LSN(tc.lsn), CommitTime: tc.commit, Xid: tc.xid}
			if m.Kind != want.Kind || m.FinalLSN != want.FinalLSN || !m.CommitTime.Equal(want.CommitTime) ||
				m.CommitTime.Location() != time.UTC || m.Xid != want.Xid || m.EndLSN != 0 || m.Event.ID != "" {
				t.Errorf("got %+v, want %+v", m, want)
			}
		})
	}
}

func TestDecodeCommit(t *testing.T) {
	cases := []struct {
		name              string
		flags             byte
		commitLSN, endLSN uint64
		commit            time.Time
	}{
		{"typical", 0, 0x16B3748, 0x16B3778, time.Date(2026, 11, 29, 19, 31, 48, 123456000, time.UTC)},
		{"zero", 0, 0, 0, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"flags ignored", 7, 1 << 40, 1<<40 + 48, time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := decoder.New("public", "outbox_events", outbox.DefaultColumns())
			m := decoder.Message{Xid: 5, FinalLSN: 5}
			if err := d.Decode(commitMsg(tc.flags, tc.commitLSN, tc.endLSN, tc.commit), &m); err != nil {
				t.Fatal(err)
			}
			if m.Kind != decoder.KindCommit || m.CommitLSN != pglogrepl.LSN(tc.commitLSN) || m.EndLSN != pglogrepl.LSN(tc.endLSN) ||
				!m.CommitTime.Equal(tc.commit) || m.Xid != 0 || m.FinalLSN != 0 {
				t.Errorf("got %+v", m)
			}
		})
	}
}

// reordered puts the outbox columns in another order, with extra columns
// between them.
var reordered = []relCol{
	{name: "seq", typ: oidInt8, typmod: -1, key: true},
	{name: "created_at", typ: oidTimestamptz, typmod: -1},
	{name: "payload", typ: oidJSON, typmod: -1},
	{name: "trace_id", typ: oidText, typmod: -1},
	{name: "event_type", typ: oidText, typmod: -1},
	{name: "aggregate_id", typ: oidText, typmod: -1},
	{name: "aggregate_type", typ: oidText, typmod: -1},
	{name: "id", typ: oidUUID, typmod: -1},
	{name: "published_at", typ: oidTimestamptz, typmod: -1},
}

// insertCases are valid inserts into the outbox table.
var insertCases = []struct {
	name string
	cols []relCol // nil means defaultCols
	row  row
	want func(*outbox.Event)
}{
	{name: "default layout, fractional seconds +00", row: goodRow()},
	{
		name: "no fractional seconds",
		row:  goodRow().with("created_at", text("2026-11-29 19:31:48+00")),
		want: func(e *outbox.Event) { e.CreatedAt = time.Date(2026, 11, 29, 19, 31, 48, 0, time.UTC) },
	},
	{
		name: "offset +05:30",
		row:  goodRow().with("created_at", text("2026-11-30 01:01:48.5+05:30")),
		want: func(e *outbox.Event) { e.CreatedAt = time.Date(2026, 11, 29, 19, 31, 48, 500000000, time.UTC) },
	},
	{
		name: "offset -03",
		row:  goodRow().with("created_at", text("2026-11-29 16:31:48.000001-03")),
		want: func(e *outbox.Event) { e.CreatedAt = time.Date(2026, 11, 29, 19, 31, 48, 1000, time.UTC) },
	},
	{
		name: "offset with seconds (local mean time)",
		row:  goodRow().with("created_at", text("1850-01-01 00:00:00+00:53:28")),
		want: func(e *outbox.Event) { e.CreatedAt = time.Date(1849, 12, 31, 23, 6, 32, 0, time.UTC) },
	},
	{
		name: "leap day, offset crosses midnight",
		row:  goodRow().with("created_at", text("2028-02-29 23:30:00-01")),
		want: func(e *outbox.Event) { e.CreatedAt = time.Date(2028, 3, 1, 0, 30, 0, 0, time.UTC) },
	},
	{
		name: "five digit year",
		row:  goodRow().with("created_at", text("10000-01-01 00:00:00+00")),
		want: func(e *outbox.Event) { e.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
	},
	{
		name: "BC",
		row:  goodRow().with("created_at", text("0044-03-15 12:00:00+00 BC")),
		want: func(e *outbox.Event) { e.CreatedAt = time.Date(-43, 3, 15, 12, 0, 0, 0, time.UTC) },
	},
	{
		name: "extra columns with NULL, TOAST and values",
		cols: append(append([]relCol{{name: "seq", typ: oidInt8, typmod: -1}}, defaultCols...),
			relCol{name: "headers", typ: oidJSONB, typmod: -1}, relCol{name: "note", typ: oidText, typmod: -1}),
		row: goodRow().with("seq", text("42")).with("headers", null).with("note", toast),
	},
	{
		name: "column order other than the default",
		cols: reordered,
		row:  goodRow().with("seq", text("7")).with("trace_id", text("abc")),
	},
	{
		name: "unicode, empty aggregate id, jsonb rendering",
		row: goodRow().with("aggregate_type", text("Bestellung")).with("aggregate_id", text("")).
			with("event_type", text("bestellung.aufgegeben")).with("payload", text(`{"name": "Jürgen 🚀", "n": null}`)),
		want: func(e *outbox.Event) {
			e.AggregateType, e.AggregateID, e.EventType = "Bestellung", "", "bestellung.aufgegeben"
			e.Payload = []byte(`{"name": "Jürgen 🚀", "n": null}`)
		},
	},
	{
		name: "binary values taken verbatim",
		row:  goodRow().with("aggregate_id", binval("\x00\x01\xff")).with("payload", binval("\x01{}")),
		want: func(e *outbox.Event) { e.AggregateID, e.Payload = "\x00\x01\xff", []byte("\x01{}") },
	},
	{
		name: "large payload",
		row:  goodRow().with("payload", text(`{"blob": "`+strings.Repeat("x", 70000)+`"}`)),
		want: func(e *outbox.Event) { e.Payload = []byte(`{"blob": "` + strings.Repeat("x", 70000) + `"}`) },
	},
}

func TestDecodeInsert(t *testing.T) {
	for _, tc := range insertCases {
		t.Run(tc.name, func(t *testing.T) {
			cols := tc.cols
			if cols == nil {
				cols = defaultCols
			}
			d := newDecoder(t, cols)
			want := goodEvent()
			if tc.want != nil {
				tc.want(&want)
			}
			msg := insertMsg(outboxOID, tc.row.vals(cols))
			m := decoder.Message{Xid: 9, CommitLSN: 9}
			if err := d.Decode(msg, &m); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if m.Kind != decoder.KindInsert {
				t.Fatalf("kind = %v, want insert", m.Kind)
			}
			if m.Xid != 0 || m.CommitLSN != 0 {
				t.Errorf("fields of other kinds not cleared: %+v", m)
			}
			if diff := diffEvent(m.Event, want); diff != "" {
				t.Error(diff)
			}
			crossCheckInsert(t, msg, cols, tc.row, m.Event)
		})
	}
}

// crossCheckInsert parses msg with pglogrepl, an independent parser, to show
// that the test encoder writes what PostgreSQL writes and that the decoder
// took each outbox column from the right place.
func crossCheckInsert(t *testing.T, msg []byte, cols []relCol, r row, ev outbox.Event) {
	t.Helper()
	pm, err := pglogrepl.Parse(msg)
	if err != nil {
		t.Fatalf("pglogrepl.Parse: %v", err)
	}
	ins, ok := pm.(*pglogrepl.InsertMessage)
	if !ok {
		t.Fatalf("pglogrepl.Parse gave %T, want *InsertMessage", pm)
	}
	if ins.RelationID != outboxOID || len(ins.Tuple.Columns) != len(cols) {
		t.Fatalf("pglogrepl: relation %d with %d columns, want %d with %d", ins.RelationID, len(ins.Tuple.Columns), outboxOID, len(cols))
	}
	got := map[string]string{
		"id": ev.ID, "aggregate_type": ev.AggregateType, "aggregate_id": ev.AggregateID,
		"event_type": ev.EventType, "payload": string(ev.Payload),
	}
	for i, c := range cols {
		pc := ins.Tuple.Columns[i]
		v := r.vals(cols)[i]
		if pc.DataType != v.kind || string(pc.Data) != v.data {
			t.Errorf("pglogrepl column %s = %c %q, encoder wrote %c %q", c.name, pc.DataType, pc.Data, v.kind, v.data)
		}
		if g, ok := got[c.name]; ok && g != string(pc.Data) {
			t.Errorf("column %s: decoder %q, pglogrepl %q", c.name, g, pc.Data)
		}
	}
}

func TestDecodeCreatedAtInvalid(t *testing.T) {
	for _, s := range []string{
		"infinity",
		"-infinity",
		"",
		"2026-11-29",
		"2026-11-29 19:31:48",               // no offset
		"2026-11-29T19:31:48Z",              // RFC 3339
		"2026-11-29 19:31:48.+00",           // empty fraction
		"2026-11-29 19:31:48.1234567890+00", // fraction too long
		"2026-13-01 00:00:00+00",
		"2026-02-29 00:00:00+00", // not a leap year
		"2026-04-31 00:00:00+00",
		"2026-11-00 00:00:00+00",
		"2026-11-29 24:00:00+00",
		"2026-11-29 19:60:00+00",
		"2026-11-29 19:31:60+00",
		"2026-11-29 19:31:48+16",
		"2026-11-29 19:31:48+05:60",
		"2026-11-29 19:31:48+5",
		"2026-11-29 19:31:48+00 AD",
		"2026-11-29 19:31:48+00 ",
		"0000-01-01 00:00:00+00",
		"26-11-29 19:31:48+00",
		"\x00\x00\x00\x00\x00\x00\x00\x00", // binary timestamptz
	} {
		t.Run(s, func(t *testing.T) {
			d := newDecoder(t, defaultCols)
			var m decoder.Message
			err := d.Decode(insertMsg(outboxOID, goodRow().with("created_at", text(s)).vals(defaultCols)), &m)
			var re *decoder.RowError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want *RowError", err)
			}
			if re.Column != "created_at" || re.ID != testID || re.Table != "public.outbox_events" || m.Kind != decoder.KindSkip {
				t.Errorf("got %+v, kind %v", re, m.Kind)
			}
		})
	}
}

func TestDecodeInsertRowErrors(t *testing.T) {
	type tc struct {
		name   string
		row    row
		column string
		reason string
		id     string
	}
	var cases []tc
	for _, c := range defaultCols {
		id := testID
		if c.name == "id" {
			id = ""
		}
		if c.name != "payload" { // a NULL payload is a tombstone (TestDecodeNullPayload)
			cases = append(cases, tc{c.name + " NULL", goodRow().with(c.name, null), c.name, "is NULL", id})
		}
		cases = append(cases,
			tc{c.name + " unchanged TOAST", goodRow().with(c.name, toast), c.name, "is an unchanged TOAST value", id},
		)
	}
	cases = append(cases, tc{"first failing column reported", goodRow().with("payload", null).with("aggregate_type", null), "aggregate_type", "is NULL", testID})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newDecoder(t, defaultCols)
			var m decoder.Message
			err := d.Decode(insertMsg(outboxOID, tc.row.vals(defaultCols)), &m)
			var re *decoder.RowError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want *RowError", err)
			}
			if re.Column != tc.column || !strings.HasPrefix(re.Reason, tc.reason) || re.ID != tc.id || re.Table != "public.outbox_events" {
				t.Errorf("got %+v", re)
			}
			if !strings.Contains(err.Error(), "column "+tc.column+" "+tc.reason) {
				t.Errorf("message %q does not say %q", err, "column "+tc.column+" "+tc.reason)
			}
			// The stream is fine: the next row decodes.
			if err := d.Decode(insertMsg(outboxOID, goodRow().vals(defaultCols)), &m); err != nil || m.Kind != decoder.KindInsert {
				t.Errorf("after RowError: kind %v, err %v", m.Kind, err)
			}
		})
	}
}

func TestDecodeErrorMessages(t *testing.T) {
	d := newDecoder(t, defaultCols)
	var m decoder.Message
	// Columns: 't' "ab", NULL, then 't' claiming 400 bytes with 31 present.
	msg := enc{'I'}.u32(outboxOID).u8('N').i16(6).u8('t').i32(2).raw([]byte("ab")).u8('n').u8('t').i32(400).raw(make([]byte, 31)).bytes()
	err := d.Decode(msg, &m)
	const want = "decode pgoutput 'I' message at byte 17: tuple column 3 length 400 runs past end of message (52 bytes)"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant  %s", err, want)
	}
	var de *decoder.DecodeError
	if !errors.As(err, &de) || de.MsgType != 'I' || de.Offset != 17 {
		t.Errorf("got %#v", err)
	}

	schemaErr := &decoder.SchemaError{Table: "public.outbox_events", Column: "payload"}
	if got, want := schemaErr.Error(), `outbox table public.outbox_events has no column "payload"; run walrelay migrate or add the column`; got != want {
		t.Errorf("SchemaError = %q, want %q", got, want)
	}
	rowErr := &decoder.RowError{Table: "public.outbox_events", ID: "x", Column: "aggregate_id", Reason: "is NULL"}
	if got, want := rowErr.Error(), `outbox row "x" in public.outbox_events: column aggregate_id is NULL`; got != want {
		t.Errorf("RowError = %q, want %q", got, want)
	}
	if got, want := (&decoder.DecodeError{MsgType: 0xff, Offset: 0, Reason: "r"}).Error(), "decode pgoutput 0xff message at byte 0: r"; got != want {
		t.Errorf("DecodeError = %q, want %q", got, want)
	}
}

func TestDecodeMalformed(t *testing.T) {
	cases := []struct {
		name   string
		msg    []byte
		offset int
		reason string
	}{
		{"empty", nil, 0, "empty message"},
		{"insert tag not N", enc{'I'}.u32(outboxOID).u8('K').tuple(goodRow().vals(defaultCols)).bytes(), 5, "tuple tag is 'K'"},
		{"insert column count differs", insertMsg(outboxOID, goodRow().vals(defaultCols)[:5]), 6, "tuple has 5 columns but the Relation message for it has 6"},
		{"insert negative length", enc{'I'}.u32(outboxOID).u8('N').i16(6).u8('t').i32(-1).bytes(), 9, "tuple column 1 has negative length -1"},
		{"insert huge length", enc{'I'}.u32(outboxOID).u8('N').i16(6).u8('t').i32(1 << 30).raw([]byte("x")).bytes(), 9, "tuple column 1 length 1073741824 runs past end"},
		{"insert unknown column kind", enc{'I'}.u32(outboxOID).u8('N').i16(6).u8('x').bytes(), 8, "tuple column 1 has unknown kind 'x'"},
		{"insert trailing bytes", append(insertMsg(outboxOID, goodRow().vals(defaultCols)), 0), len(insertMsg(outboxOID, goodRow().vals(defaultCols))), "1 unexpected bytes"},
		{"insert for OID never described", insertMsg(99999, goodRow().vals(defaultCols)), 1, "relation OID 99999 that no Relation message described"},
		{"relation negative column count", enc{'R'}.u32(1).str("public").str("t").u8('d').i16(-2).bytes(), 15, "negative column count -2"},
		{"relation column count larger than message", enc{'R'}.u32(1).str("public").str("t").u8('d').i16(32767).bytes(), 15, "32767 columns need at least 327670 bytes"},
		{"relation name not terminated", enc{'R'}.u32(1).str("public").raw([]byte("outbox_events")).bytes(), 12, "relation name has no NUL terminator"},
		{"begin trailing bytes", append(beginMsg(1, time.Unix(0, 0), 1), 1, 2), 21, "2 unexpected bytes"},
		{"commit short", commitMsg(0, 1, 2, time.Unix(0, 0))[:20], 18, "commit timestamp (8 bytes) runs past end of message (20 bytes)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newDecoder(t, defaultCols)
			var m decoder.Message
			err := d.Decode(tc.msg, &m)
			var de *decoder.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("err = %v, want *DecodeError", err)
			}
			if de.Offset != tc.offset || !strings.Contains(de.Reason, tc.reason) || m.Kind != decoder.KindSkip {
				t.Errorf("got offset %d reason %q kind %v, want offset %d reason containing %q", de.Offset, de.Reason, m.Kind, tc.offset, tc.reason)
			}
			if len(tc.msg) > 0 && de.MsgType != tc.msg[0] {
				t.Errorf("MsgType = %q, want %q", de.MsgType, tc.msg[0])
			}
		})
	}
}

func TestDecodeSkips(t *testing.T) {
	oldRow := goodRow().vals(defaultCols)
	cases := []struct {
		name string
		msg  []byte
	}{
		{"insert into another table", insertMsg(otherOID, []val{text("1"), null})},
		{"insert into another table, malformed tuple", enc{'I'}.u32(otherOID).u8('?').bytes()},
		{"relation of another table", relationMsg(otherOID+1, "public", "orders", []relCol{{name: "id", typ: oidInt8, typmod: -1}})},
		{"relation of same name in another schema", relationMsg(otherOID+2, "audit", "outbox_events", defaultCols)},
		{"update of outbox row", updateMsg(outboxOID, 0, nil, oldRow)},
		{"update with old key", updateMsg(outboxOID, 'K', []val{text(testID)}, oldRow)},
		{"delete of outbox row", deleteMsg(outboxOID, 'K', []val{text(testID), null, null, null, null, null})},
		{"delete with old row", deleteMsg(otherOID, 'O', []val{text("1"), text("x")})},
		{"truncate", truncateMsg(1, outboxOID, otherOID)},
		{"type", typeMsg(70000, "public", "mood")},
		{"origin", originMsg(0x16B3748, "pg_node_2")},
		{"logical message", logicalMsg(true, 0x16B3748, "walrelay", []byte("hello"))},
		{"non-transactional logical message", logicalMsg(false, 1, "p", nil)},
		{"short update", []byte{'U'}},
		{"short delete", []byte{'D', 0}},
		{"short truncate", []byte{'T'}},
		{"short type", []byte{'Y'}},
		{"short origin", []byte{'O'}},
		{"short logical message", []byte{'M', 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newDecoder(t, defaultCols)
			var m decoder.Message
			if err := d.Decode(relationMsg(otherOID, "public", "orders", []relCol{{name: "id", typ: oidInt8, typmod: -1}, {name: "x", typ: oidText, typmod: -1}}), &m); err != nil || m.Kind != decoder.KindSkip {
				t.Fatalf("other relation: kind %v, err %v", m.Kind, err)
			}
			m = decoder.Message{Kind: decoder.KindInsert, Event: goodEvent()}
			if err := d.Decode(tc.msg, &m); err != nil {
				t.Fatalf("err = %v", err)
			}
			if m.Kind != decoder.KindSkip || m.Event.ID != "" {
				t.Errorf("kind %v event %+v, want skip and cleared", m.Kind, m.Event)
			}
			// The outbox relation is still cached.
			if err := d.Decode(insertMsg(outboxOID, goodRow().vals(defaultCols)), &m); err != nil || m.Kind != decoder.KindInsert {
				t.Errorf("insert after skip: kind %v err %v", m.Kind, err)
			}
		})
	}
}

func TestDecodeRejectsProtocolV2(t *testing.T) {
	cases := []struct {
		name string
		msg  []byte
	}{
		{"stream start", streamStartMsg(771, true)},
		{"stream stop", streamStopMsg()},
		{"stream commit", streamCommitMsg(771, 1, 2, time.Unix(0, 0))},
		{"stream abort", streamAbortMsg(771, 772)},
		{"prepare", []byte{'P', 0}},
		{"unknown", []byte{'Z', 1, 2}},
		{"zero byte", []byte{0}},
		{"high byte", []byte{0xff}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newDecoder(t, defaultCols)
			var m decoder.Message
			err := d.Decode(tc.msg, &m)
			var de *decoder.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("err = %v, want *DecodeError", err)
			}
			if de.MsgType != tc.msg[0] || de.Offset != 0 || !strings.Contains(de.Reason, "walrelay requests pgoutput protocol version 1") {
				t.Errorf("got %+v", de)
			}
		})
	}
}

func TestRelationOtherTableThenInsertSkipped(t *testing.T) {
	d := decoder.New("public", "outbox_events", outbox.DefaultColumns())
	var m decoder.Message
	if err := d.Decode(relationMsg(otherOID, "public", "orders", defaultCols), &m); err != nil || m.Kind != decoder.KindSkip {
		t.Fatalf("relation: kind %v err %v", m.Kind, err)
	}
	if err := d.Decode(insertMsg(otherOID, goodRow().vals(defaultCols)), &m); err != nil || m.Kind != decoder.KindSkip {
		t.Fatalf("insert: kind %v err %v", m.Kind, err)
	}
	// An OID that no Relation described is a protocol error, not a skip.
	var de *decoder.DecodeError
	if err := d.Decode(insertMsg(outboxOID, goodRow().vals(defaultCols)), &m); !errors.As(err, &de) {
		t.Fatalf("insert for undescribed OID: err = %v, want *DecodeError", err)
	}
}

func TestRelationChange(t *testing.T) {
	d := newDecoder(t, defaultCols)
	var m decoder.Message
	if err := d.Decode(insertMsg(outboxOID, goodRow().vals(defaultCols)), &m); err != nil || diffEvent(m.Event, goodEvent()) != "" {
		t.Fatalf("before change: err %v event %+v", err, m.Event)
	}

	// Same OID, columns reordered and added (e.g. after a migration).
	if err := d.Decode(outboxRelation(reordered), &m); err != nil || m.Kind != decoder.KindRelation {
		t.Fatalf("relation change: kind %v err %v", m.Kind, err)
	}
	r := goodRow().with("seq", text("1"))
	if err := d.Decode(insertMsg(outboxOID, r.vals(reordered)), &m); err != nil || diffEvent(m.Event, goodEvent()) != "" {
		t.Fatalf("after change: err %v diff %s", err, diffEvent(m.Event, goodEvent()))
	}
	// The old layout no longer fits.
	var de *decoder.DecodeError
	if err := d.Decode(insertMsg(outboxOID, goodRow().vals(defaultCols)), &m); !errors.As(err, &de) {
		t.Fatalf("old layout after change: err = %v, want *DecodeError", err)
	}

	// The OID now describes another table: its inserts are skipped.
	if err := d.Decode(relationMsg(outboxOID, "public", "renamed", reordered), &m); err != nil || m.Kind != decoder.KindSkip {
		t.Fatalf("rename: kind %v err %v", m.Kind, err)
	}
	if err := d.Decode(insertMsg(outboxOID, r.vals(reordered)), &m); err != nil || m.Kind != decoder.KindSkip {
		t.Fatalf("insert after rename: kind %v err %v", m.Kind, err)
	}
}

func TestSchemaError(t *testing.T) {
	for _, missing := range defaultCols {
		t.Run(missing.name, func(t *testing.T) {
			var cols []relCol
			for _, c := range defaultCols {
				if c.name != missing.name {
					cols = append(cols, c)
				}
			}
			cols = append(cols, relCol{name: missing.name + "_old", typ: oidText, typmod: -1})
			d := decoder.New("public", "outbox_events", outbox.DefaultColumns())
			var m decoder.Message
			err := d.Decode(outboxRelation(cols), &m)
			var se *decoder.SchemaError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want *SchemaError", err)
			}
			if se.Table != "public.outbox_events" || se.Column != missing.name || m.Kind != decoder.KindSkip {
				t.Errorf("got %+v kind %v", se, m.Kind)
			}
			if want := fmt.Sprintf("has no column %q; run walrelay migrate", missing.name); !strings.Contains(err.Error(), want) {
				t.Errorf("message %q lacks %q", err, want)
			}
			// Inserts into the broken table keep failing with the same error.
			var se2 *decoder.SchemaError
			if err := d.Decode(insertMsg(outboxOID, goodRow().vals(cols)), &m); !errors.As(err, &se2) || se2.Column != missing.name {
				t.Errorf("insert: err = %v, want the SchemaError", err)
			}
			// A fixed Relation (after the migration) repairs it.
			if err := d.Decode(outboxRelation(defaultCols), &m); err != nil {
				t.Fatal(err)
			}
			if err := d.Decode(insertMsg(outboxOID, goodRow().vals(defaultCols)), &m); err != nil || m.Kind != decoder.KindInsert {
				t.Errorf("after fix: kind %v err %v", m.Kind, err)
			}
		})
	}
}

// validMessages are well-formed messages the decoder parses in full; the
// decoder passed to decode has the outbox relation cached.
func validMessages() []struct {
	name string
	msg  []byte
} {
	return []struct {
		name string
		msg  []byte
	}{
		{"begin", beginMsg(0x16B3748, time.Date(2026, 11, 29, 19, 31, 48, 0, time.UTC), 771)},
		{"commit", commitMsg(0, 0x16B3748, 0x16B3778, time.Date(2026, 11, 29, 19, 31, 48, 0, time.UTC))},
		{"relation outbox", outboxRelation(defaultCols)},
		{"relation outbox reordered", outboxRelation(reordered)},
		{"relation other table", relationMsg(otherOID, "public", "orders", defaultCols)},
		{"insert", insertMsg(outboxOID, goodRow().vals(defaultCols))},
		{"insert with binary and empty values", insertMsg(outboxOID, goodRow().with("aggregate_id", binval("")).with("event_type", text("")).vals(defaultCols))},
	}
}

func TestDecodeTruncatedPrefixes(t *testing.T) {
	for _, v := range validMessages() {
		t.Run(v.name, func(t *testing.T) {
			var m decoder.Message
			if err := newDecoder(t, defaultCols).Decode(v.msg, &m); err != nil {
				t.Fatalf("full message: %v", err)
			}
			for n := range len(v.msg) {
				d := newDecoder(t, defaultCols)
				m := decoder.Message{Kind: decoder.KindInsert}
				err := d.Decode(v.msg[:n:n], &m)
				var de *decoder.DecodeError
				if !errors.As(err, &de) {
					t.Fatalf("prefix of %d bytes: err = %v, want *DecodeError", n, err)
				}
				if m.Kind != decoder.KindSkip || de.Offset > n {
					t.Errorf("prefix of %d bytes: kind %v, offset %d", n, m.Kind, de.Offset)
				}
			}
			var de *decoder.DecodeError
			if err := newDecoder(t, defaultCols).Decode(append(v.msg[:len(v.msg):len(v.msg)], 0), &m); !errors.As(err, &de) {
				t.Errorf("with a trailing byte: err = %v, want *DecodeError", err)
			}
		})
	}
}

func TestEventDoesNotAliasInput(t *testing.T) {
	d := newDecoder(t, defaultCols)
	msg := insertMsg(outboxOID, goodRow().vals(defaultCols))
	var m decoder.Message
	if err := d.Decode(msg, &m); err != nil {
		t.Fatal(err)
	}
	first := m.Event
	for i := range msg {
		msg[i] = 'X'
	}
	if diff := diffEvent(first, goodEvent()); diff != "" {
		t.Fatalf("after overwriting the input: %s", diff)
	}

	// Reusing m for the next insert leaves the first event intact too.
	second := goodRow().with("id", text("11111111-2222-3333-4444-555555555555")).with("payload", text(`{}`))
	if err := d.Decode(insertMsg(outboxOID, second.vals(defaultCols)), &m); err != nil {
		t.Fatal(err)
	}
	if diff := diffEvent(first, goodEvent()); diff != "" {
		t.Fatalf("after the next decode: %s", diff)
	}
	if m.Event.ID != "11111111-2222-3333-4444-555555555555" || string(m.Event.Payload) != "{}" {
		t.Fatalf("second event = %+v", m.Event)
	}
	// Appending to the payload must not write into the strings' bytes.
	_ = append(first.Payload, "trailing"...)
	if diff := diffEvent(first, goodEvent()); diff != "" {
		t.Fatalf("after appending to Payload: %s", diff)
	}
}

// TestEncoderAgreesWithPglogrepl checks every builder against pglogrepl's
// parser, so the bytes the tests feed the decoder are what PostgreSQL sends.
func TestEncoderAgreesWithPglogrepl(t *testing.T) {
	commit := time.Date(2026, 11, 29, 19, 31, 48, 123456000, time.UTC)
	check := func(name string, msg []byte, ok func(pglogrepl.Message) bool) {
		t.Helper()
		pm, err := pglogrepl.Parse(msg)
		if err != nil {
			t.Errorf("%s: pglogrepl.Parse: %v", name, err)
			return
		}
		if !ok(pm) {
			t.Errorf("%s: pglogrepl read %+v", name, pm)
		}
	}
	check("begin", beginMsg(0x16B3748, commit, 771), func(pm pglogrepl.Message) bool {
		b, ok := pm.(*pglogrepl.BeginMessage)
		return ok && b.FinalLSN == 0x16B3748 && b.CommitTime.Equal(commit) && b.Xid == 771
	})
	check("commit", commitMsg(0, 10, 20, commit), func(pm pglogrepl.Message) bool {
		c, ok := pm.(*pglogrepl.CommitMessage)
		return ok && c.CommitLSN == 10 && c.TransactionEndLSN == 20 && c.CommitTime.Equal(commit)
	})
	check("relation", outboxRelation(reordered), func(pm pglogrepl.Message) bool {
		r, ok := pm.(*pglogrepl.RelationMessage)
		if !ok || r.RelationID != outboxOID || r.Namespace != "public" || r.RelationName != "outbox_events" || int(r.ColumnNum) != len(reordered) {
			return false
		}
		for i, c := range r.Columns {
			want := reordered[i]
			if c.Name != want.name || c.DataType != want.typ || c.TypeModifier != want.typmod || (c.Flags == 1) != want.key {
				return false
			}
		}
		return true
	})
	check("update", updateMsg(outboxOID, 'O', []val{text("a")}, []val{text("b"), null, toast}), func(pm pglogrepl.Message) bool {
		u, ok := pm.(*pglogrepl.UpdateMessage)
		return ok && u.RelationID == outboxOID && u.OldTupleType == 'O' && string(u.OldTuple.Columns[0].Data) == "a" &&
			len(u.NewTuple.Columns) == 3 && u.NewTuple.Columns[2].DataType == 'u'
	})
	check("delete", deleteMsg(otherOID, 'K', []val{text("k")}), func(pm pglogrepl.Message) bool {
		d, ok := pm.(*pglogrepl.DeleteMessage)
		return ok && d.RelationID == otherOID && d.OldTupleType == 'K' && string(d.OldTuple.Columns[0].Data) == "k"
	})
	check("truncate", truncateMsg(1, 5, 6), func(pm pglogrepl.Message) bool {
		tr, ok := pm.(*pglogrepl.TruncateMessage)
		return ok && tr.RelationNum == 2 && tr.Option == 1 && tr.RelationIDs[0] == 5 && tr.RelationIDs[1] == 6
	})
	check("type", typeMsg(70000, "public", "mood"), func(pm pglogrepl.Message) bool {
		ty, ok := pm.(*pglogrepl.TypeMessage)
		return ok && ty.DataType == 70000 && ty.Namespace == "public" && ty.Name == "mood"
	})
	check("origin", originMsg(42, "node"), func(pm pglogrepl.Message) bool {
		o, ok := pm.(*pglogrepl.OriginMessage)
		return ok && o.CommitLSN == 42 && o.Name == "node"
	})
	check("logical message", logicalMsg(true, 42, "walrelay", []byte("hi")), func(pm pglogrepl.Message) bool {
		l, ok := pm.(*pglogrepl.LogicalDecodingMessage)
		return ok && l.Transactional && l.LSN == 42 && l.Prefix == "walrelay" && string(l.Content) == "hi"
	})
	checkV2 := func(name string, msg []byte, ok func(pglogrepl.Message) bool) {
		t.Helper()
		pm, err := pglogrepl.ParseV2(msg, false)
		if err != nil || !ok(pm) {
			t.Errorf("%s: pglogrepl.ParseV2: %+v, %v", name, pm, err)
		}
	}
	checkV2("stream start", streamStartMsg(771, true), func(pm pglogrepl.Message) bool {
		s, ok := pm.(*pglogrepl.StreamStartMessageV2)
		return ok && s.Xid == 771 && s.FirstSegment == 1
	})
	checkV2("stream commit", streamCommitMsg(771, 10, 20, commit), func(pm pglogrepl.Message) bool {
		s, ok := pm.(*pglogrepl.StreamCommitMessageV2)
		return ok && s.Xid == 771 && s.CommitLSN == 10 && s.TransactionEndLSN == 20 && s.CommitTime.Equal(commit)
	})
	checkV2("stream abort", streamAbortMsg(771, 772), func(pm pglogrepl.Message) bool {
		s, ok := pm.(*pglogrepl.StreamAbortMessageV2)
		return ok && s.Xid == 771 && s.SubXid == 772
	})
}

// migratedCols is the outbox table with the bookkeeping columns walrelay migrate adds.
var migratedCols = append(append([]relCol(nil), defaultCols...),
	relCol{name: "attempts", typ: 23, typmod: -1},
	relCol{name: "processed_at", typ: oidTimestamptz, typmod: -1},
	relCol{name: "retry_after", typ: oidTimestamptz, typmod: -1},
	relCol{name: "last_error", typ: oidText, typmod: -1},
	relCol{name: "dead_lettered_at", typ: oidTimestamptz, typmod: -1},
)

// handedOverRow is walrelay's re-insert of a failed event whose row the
// application had deleted (poller.Store.RecordFailures).
func handedOverRow() row {
	return goodRow().with("attempts", text("1")).with("retry_after", text("2026-11-29 19:31:49.5+00")).
		with("last_error", text("MESSAGE_TOO_LARGE"))
}

// A row inserted with retry_after set belongs to the poller: the stream must not
// publish it again (the --on-publish none re-insert), whatever else it holds.
func TestDecodeHandedOver(t *testing.T) {
	cases := []struct {
		name string
		cols []relCol
		row  row
		want decoder.Kind
	}{
		{"application insert", migratedCols, goodRow().with("attempts", text("0")), decoder.KindInsert},
		{"re-insert for the poller", migratedCols, handedOverRow(), decoder.KindHandedOver},
		{"re-insert that is a dead letter at once", migratedCols,
			handedOverRow().with("dead_lettered_at", text("2026-11-29 19:31:48.2+00")), decoder.KindHandedOver},
		{"retry_after in binary", migratedCols, goodRow().with("retry_after", binval("\x00\x01")), decoder.KindHandedOver},
		// The poller would never publish a row with attempts but no retry_after, so
		// the stream must.
		{"attempts without retry_after", migratedCols, goodRow().with("attempts", text("3")), decoder.KindInsert},
		// A handed-over row is the poller's to read, broken or not.
		{"re-insert with an unmappable created_at", migratedCols,
			handedOverRow().with("created_at", text("infinity")), decoder.KindHandedOver},
		{"table without retry_after", append(append([]relCol(nil), defaultCols...), relCol{name: "attempts", typ: 23, typmod: -1}),
			goodRow().with("attempts", text("1")), decoder.KindInsert},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newDecoder(t, tc.cols)
			m := decoder.Message{Kind: decoder.KindInsert, Event: goodEvent(), Xid: 9}
			if err := d.Decode(insertMsg(outboxOID, tc.row.vals(tc.cols)), &m); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if m.Kind != tc.want {
				t.Fatalf("kind = %v, want %v", m.Kind, tc.want)
			}
			switch {
			case tc.want == decoder.KindHandedOver && (m.Event.ID != "" || m.Event.Payload != nil || m.Xid != 0):
				t.Errorf("handed-over insert left fields set: %+v", m)
			case tc.want == decoder.KindInsert && diffEvent(m.Event, goodEvent()) != "":
				t.Error(diffEvent(m.Event, goodEvent()))
			}
		})
	}
}

// Decoding an insert, streamed or handed over, costs no allocation of its own: the
// slab a few hundred events share is all (see BenchmarkDecodeInsert).
func TestDecodeInsertAllocs(t *testing.T) {
	for name, r := range map[string]row{"insert": goodRow().with("attempts", text("0")), "handed over": handedOverRow()} {
		t.Run(name, func(t *testing.T) {
			d := newDecoder(t, migratedCols)
			msg := insertMsg(outboxOID, r.vals(migratedCols))
			var m decoder.Message
			if allocs := testing.AllocsPerRun(1000, func() {
				if err := d.Decode(msg, &m); err != nil {
					t.Fatal(err)
				}
			}); allocs != 0 {
				t.Errorf("%v allocations per decoded insert, want 0", allocs)
			}
		})
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[decoder.Kind]string{
		decoder.KindSkip: "skip", decoder.KindBegin: "begin", decoder.KindInsert: "insert",
		decoder.KindCommit: "commit", decoder.KindRelation: "relation", decoder.KindHandedOver: "handed-over", 42: "Kind(42)",
	} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}

func BenchmarkDecodeInsert(b *testing.B) {
	payload := `{"order_id":"ord-81723","customer_id":"cus-5521","total":{"amount":4200,"currency":"EUR"},` +
		`"lines":[{"sku":"A-1","qty":2,"price":1500},{"sku":"B-7","qty":1,"price":1200}],"placed_at":"2026-11-29T19:31:48Z"}`
	if len(payload) < 190 || len(payload) > 210 {
		b.Fatalf("payload is %d bytes, want about 200", len(payload))
	}
	d := newDecoder(b, defaultCols)
	msg := insertMsg(outboxOID, goodRow().with("payload", text(payload)).vals(defaultCols))
	var m decoder.Message
	if err := d.Decode(msg, &m); err != nil || string(m.Event.Payload) != payload {
		b.Fatalf("decode: %v", err)
	}
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if err := d.Decode(msg, &m); err != nil {
			b.Fatal(err)
		}
	}
}
