package poller_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
)

// scanOnly hides a row's raw values, so that ScanEvent reads it through Scan.
type scanOnly struct{ pgx.Row }

// ScanEvent reads a row from the bytes pgx received when its columns are text (or
// bytea sent in binary), and through Scan otherwise: both give the same event, with
// NULLs and unpublishable rows told apart alike, and the first allocates less.
func TestScanEventReadsRawColumnsAsScanDoes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := testenv.Connect(t, testenv.Database(t))
	shape := catalog.DefaultShape("outbox_events")
	shape.Columns.Headers = []outbox.HeaderColumn{{Column: "tenant"}, {Column: "region", Header: "r"}}
	shape.Columns.Partition = "part"
	shape.Columns.Trace = "traceparent"
	shape.Columns.Envelope = []outbox.HeaderColumn{{Column: "source"}}
	const trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	// The select list of EventColumns for this shape, then two extra columns.
	const rows = `SELECT id::text, aggregate_type::text, aggregate_id::text, event_type::text, payload, created_at,
		tenant, region, part, traceparent, source, attempts, position FROM (VALUES
		('1', 'order', 'o-1', 'order.created', '{"a":1}'::bytea, '2026-12-03 04:05:06.789+00'::timestamptz, 't1', 'eu', '2', '` + trace + `', 'shop', 3, '(0,1)'),
		('2', 'order', 'o-2', 'order.paid', ''::bytea, '2026-12-03 04:05:06.789+00'::timestamptz, NULL, NULL, NULL, NULL, NULL, 0, '(0,2)'),
		('3', 'order', 'o-3', 'order.paid', NULL, '2026-12-03 04:05:06.789+00'::timestamptz, '', 'us', NULL, NULL, '', 1, '(0,3)'),
		(NULL, 'order', 'o-4', 'x', '{}'::bytea, '2026-12-03 04:05:06.789+00'::timestamptz, NULL, NULL, NULL, NULL, NULL, 0, '(0,4)'),
		('5', 'order', 'o-5', NULL, '{}'::bytea, '2026-12-03 04:05:06.789+00'::timestamptz, NULL, NULL, NULL, NULL, NULL, 0, '(0,5)'),
		('6', 'order', 'o-6', 'x', '{}'::bytea, 'infinity'::timestamptz, NULL, NULL, NULL, NULL, NULL, 0, '(0,6)')
	) v(id, aggregate_type, aggregate_id, event_type, payload, created_at, tenant, region, part, traceparent, source, attempts, position)
	ORDER BY v.position`
	type read struct {
		ev          outbox.Event
		bad, err    string
		attempts    int
		position    string
		allocations float64
	}
	readAll := func(hide bool) []read {
		t.Helper()
		r, err := conn.Query(ctx, rows)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var out []read
		for r.Next() {
			var x read
			var row pgx.Row = r
			if hide {
				row = scanOnly{r}
			}
			x.allocations = testing.AllocsPerRun(10, func() {
				ev, bad, err := poller.ScanEvent(row, shape, &x.attempts, &x.position)
				x.ev = ev
				x.bad, x.err = errText(bad), errText(err)
			})
			out = append(out, x)
		}
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	raw, scanned := readAll(false), readAll(true)
	if len(raw) != 6 || len(scanned) != 6 {
		t.Fatalf("read %d and %d rows, want 6", len(raw), len(scanned))
	}
	for i := range raw {
		a, b := raw[i], scanned[i]
		if !reflect.DeepEqual(a.ev, b.ev) || a.bad != b.bad || a.err != b.err || a.attempts != b.attempts || a.position != b.position {
			t.Errorf("row %d: from the raw columns %+v; through Scan %+v", i+1, a, b)
		}
		if a.allocations >= b.allocations {
			t.Errorf("row %d: %v allocations from the raw columns, %v through Scan: the raw read is not taken", i+1, a.allocations, b.allocations)
		}
	}
	first := raw[0].ev
	if first.ID != "1" || first.EventType != "order.created" || string(first.Payload) != `{"a":1}` || first.Partition != "2" ||
		len(first.Envelope) != 1 || first.Envelope[0].Value != "shop" || raw[0].attempts != 3 || raw[0].position != "(0,1)" {
		t.Errorf("first row read as %+v", raw[0])
	}
	if got := headerValues(first.Headers); got["tenant"] != "t1" || got["r"] != "eu" || got[outbox.TraceParentHeader] != trace {
		t.Errorf("first row's headers: %v", first.Headers)
	}
	if ev := raw[1].ev; ev.NullPayload || ev.Payload == nil || len(ev.Payload) != 0 || !ev.Headers[0].Null || !ev.Envelope[0].Null {
		t.Errorf("an empty payload and NULL placed columns read as %+v", ev)
	}
	if ev := raw[2].ev; !ev.NullPayload || ev.Headers[0].Null || ev.Headers[0].Value != "" || ev.Envelope[0].Null {
		t.Errorf("a NULL payload and empty placed columns read as %+v", ev)
	}
	for i, want := range map[int]string{3: "outbox row: column id is NULL: an event needs its id",
		4: "outbox row 5: column event_type is NULL", 5: "outbox row 6: column created_at is not a finite timestamp"} {
		if raw[i].bad != want {
			t.Errorf("row %d: unpublishable %q, want %q", i+1, raw[i].bad, want)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func headerValues(hs []outbox.Header) map[string]string {
	m := map[string]string{}
	for _, h := range hs {
		m[h.Key] = h.Value
	}
	return m
}
