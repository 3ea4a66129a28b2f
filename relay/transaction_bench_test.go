package relay

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/replication"
)

// BenchmarkTransaction is the relay's own work for one single-event transaction
// of the stream, as docs/performance.md ("Moderate rates: the relay's per-transaction
// work") counts it: the pipeline decodes its Begin, Insert and Commit, labels the
// event, tracks it in the watermark and window, hands it to a sink that acks it at
// once, settles it (--on-publish progress: at the ack), and every 500 transactions
// (a status interval at 5,000/s) the watermark computes the confirmable LSN. Nothing
// of a broker client's or of the replication connection's reads is in it.
func BenchmarkTransaction(b *testing.B) {
	r := &Relay{window: replication.NewWindow(1<<20, 1<<40), acks: newAckClock(time.Now())}
	m, err := newMetrics(prometheus.NewRegistry(), r)
	if err != nil {
		b.Fatal(err)
	}
	r.metrics = m
	r.cfg.OnPublish = poller.Progress
	shape := catalog.DefaultShape("outbox_events")
	tables := []table{{TableConfig: TableConfig{Table: "outbox_events", TopicTemplate: "outbox.{aggregate_type}"},
		shape: shape, name: shape.Qualified()}}
	dec := decoder.NewTables([]decoder.Table{{Schema: shape.Schema, Name: shape.Name, Columns: shape.Columns}})
	wm := replication.NewWatermark(r.window, 0)
	p := &pipeline{dec: dec, wm: wm, d: atLeastOnce{r.publisher(ackingSink{}, nil)}, tables: tables}
	ctx := context.Background()
	if err := p.HandleWAL(ctx, pgoutputRelation()); err != nil {
		b.Fatal(err)
	}
	const perStatus = 500
	commit := time.Now()
	insert := pgoutputInsert("0b7e5c4a-3f1d-4e2b-9a8c-7d6e5f4a3b2c", "order", "ord-81723", "order.placed",
		`{"total": 4200, "currency": "EUR", "lines": [{"sku": "A-1", "qty": 2}], "pad": "`+fmt.Sprintf("%0130d", 0)+`"}`,
		"2026-11-29 19:31:48.123456+00")
	lsn := uint64(1 << 20)
	var begin, end []byte
	b.ReportAllocs()
	n := 0
	before := CPUUsed(b)
	for b.Loop() {
		lsn += 512
		begin = pgoutputBegin(begin[:0], lsn, commit, uint32(n))
		end = pgoutputCommit(end[:0], lsn, lsn+48, commit)
		if err := p.HandleWAL(ctx, begin); err != nil {
			b.Fatal(err)
		}
		if err := p.HandleWAL(ctx, insert); err != nil {
			b.Fatal(err)
		}
		if err := p.HandleWAL(ctx, end); err != nil {
			b.Fatal(err)
		}
		if n++; n%perStatus == 0 {
			if got := wm.Confirmable(); got != pglogrepl.LSN(lsn+48) {
				b.Fatalf("confirmable %d, want %d", got, lsn+48)
			}
		}
	}
	// The process's CPU, the garbage collector's included, per transaction.
	b.ReportMetric(float64(CPUUsed(b)-before)/float64(b.N), "CPU-ns/op")
}

// pgoutput protocol version 1 messages, as PostgreSQL writes them, for the outbox
// table walrelay migrate creates.

const benchRelationOID = 16390

func pgoutputRelation() []byte {
	cols := []struct {
		name   string
		typ    uint32
		typmod int32
	}{{"id", 2950, -1}, {"aggregate_type", 1043, 259}, {"aggregate_id", 25, -1}, {"event_type", 1043, 259},
		{"payload", 3802, -1}, {"created_at", 1184, -1}}
	e := binary.BigEndian.AppendUint32([]byte{'R'}, benchRelationOID)
	e = append(append(e, "public"...), 0)
	e = append(append(e, "outbox_events"...), 0)
	e = binary.BigEndian.AppendUint16(append(e, 'd'), uint16(len(cols)))
	for i, c := range cols {
		flags := byte(0)
		if i == 0 {
			flags = 1
		}
		e = append(append(append(e, flags), c.name...), 0)
		e = binary.BigEndian.AppendUint32(e, c.typ)
		e = binary.BigEndian.AppendUint32(e, uint32(c.typmod))
	}
	return e
}

func pgoutputInsert(values ...string) []byte {
	e := binary.BigEndian.AppendUint32([]byte{'I'}, benchRelationOID)
	e = binary.BigEndian.AppendUint16(append(e, 'N'), uint16(len(values)))
	for _, v := range values {
		e = binary.BigEndian.AppendUint32(append(e, 't'), uint32(len(v)))
		e = append(e, v...)
	}
	return e
}

// pgoutputBegin appends a Begin message to dst.
func pgoutputBegin(dst []byte, finalLSN uint64, commit time.Time, xid uint32) []byte {
	e := binary.BigEndian.AppendUint64(append(dst, 'B'), finalLSN)
	e = binary.BigEndian.AppendUint64(e, uint64(pgMicros(commit)))
	return binary.BigEndian.AppendUint32(e, xid)
}

// pgoutputCommit appends a Commit message to dst.
func pgoutputCommit(dst []byte, commitLSN, endLSN uint64, commit time.Time) []byte {
	e := binary.BigEndian.AppendUint64(append(dst, 'C', 0), commitLSN)
	e = binary.BigEndian.AppendUint64(e, endLSN)
	return binary.BigEndian.AppendUint64(e, uint64(pgMicros(commit)))
}

// pgMicros is t in microseconds since 2000-01-01 00:00:00 UTC.
func pgMicros(t time.Time) int64 {
	return t.Sub(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).Microseconds()
}
