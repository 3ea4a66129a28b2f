package relay

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/jackc/pglogrepl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/kafka"
)

// inflightWindow is the relay's default in-flight window in events
// (DefaultConfig's MaxInFlight), which a drain fills while the broker lags.
const inflightWindow = 10000

// BenchmarkInFlightHeap is what one event in flight keeps live on the heap: the
// pipeline decodes a full window of events (200-byte payloads, 100 per
// transaction, as the drain writes them) and hands them to a sink that answers
// none of them yet; the live heap after a collection, less the live heap before,
// per event, is B/inflight-event (docs/performance.md, "Memory: where the drain's
// resident set goes"). The drain's peak heap follows it, since the collector's goal
// is twice what is live. "held" is the relay's and the decoder's share alone (a
// sink that keeps the callbacks); "kafka" adds the Kafka sink's records and
// franz-go's per-record state, the records waiting for the topic's metadata,
// which kfake holds back, so that no batch is encoded yet and the figure does not
// depend on the producer's timing. Then every event is answered and settled: none
// is lost.
func BenchmarkInFlightHeap(b *testing.B) {
	b.Run("held", func(b *testing.B) {
		s := &holdingSink{held: make([]sink.Done, 0, inflightWindow)}
		benchInFlight(b, func() sink.Sink { return s }, func() {
			for _, d := range s.held {
				d.Done(nil)
			}
			clear(s.held)
			s.held = s.held[:0]
		})
	})
	b.Run("kafka", func(b *testing.B) {
		var hold atomic.Pointer[chan struct{}]
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		c.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			if h := hold.Load(); h != nil {
				c.SleepControl(func() { <-*h })
			}
			return nil, nil, false
		})
		var snk *kafka.Sink
		benchInFlight(b, func() sink.Sink {
			h := make(chan struct{})
			hold.Store(&h)
			var err error
			if snk, err = kafka.New(kafka.Config{Brokers: c.ListenAddrs()}); err != nil {
				b.Fatal(err)
			}
			return snk
		}, func() {
			close(*hold.Load())
			hold.Store(nil)
			defer snk.Close()
			if err := snk.Flush(context.Background()); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// benchInFlight fills the window b.N times through a sink from open and answers
// every event with release; it reports the live heap per event in flight.
func benchInFlight(b *testing.B, open func() sink.Sink, release func()) {
	r := inflightRelay(b)
	var perEvent float64
	for b.Loop() {
		p, wm := inflightPipeline(b, r, open())
		before := liveHeap()
		lsn := fillWindow(b, p, inflightWindow)
		if n, _ := r.window.InFlight(); n != inflightWindow {
			b.Fatalf("%d events in flight, want %d", n, inflightWindow)
		}
		perEvent += float64(liveHeap()-before) / inflightWindow
		release()
		waitSettled(b, r, wm, lsn)
	}
	b.ReportMetric(perEvent/float64(b.N), "B/inflight-event")
}

// TestSettledEventsKeepNoEventBytes: an event settled at its ack leaves its
// inflight to a pool, which keeps it until the collection after next; the
// inflight must not keep the event's bytes, which the decoder carved from a slab
// that any of them keeps alive whole. Live heap per settled event after one
// collection: about 580 bytes when the pooled inflights keep their events, about
// the inflight's own 320 when they do not.
func TestSettledEventsKeepNoEventBytes(t *testing.T) {
	const n = 2000
	r := inflightRelay(t)
	s := &holdingSink{held: make([]sink.Done, 0, n)}
	p, wm := inflightPipeline(t, r, s)
	before := liveHeap()
	lsn := fillWindow(t, p, n)
	for _, d := range s.held {
		d.Done(nil)
	}
	clear(s.held)
	waitSettled(t, r, wm, lsn)
	runtime.GC() // one: the pool keeps what was put back since the last
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if per := (int64(ms.HeapAlloc) - before) / n; per > 420 {
		t.Errorf("%d live bytes per settled event, want at most 420: settled events keep their bytes", per)
	}
	runtime.KeepAlive(p)
}

// inflightRelay is a relay with what the pipeline's publisher needs, settling at
// the ack (--on-publish progress).
func inflightRelay(tb testing.TB) *Relay {
	r := &Relay{window: replication.NewWindow(1<<20, 1<<40), acks: newAckClock(time.Now())}
	m, err := newMetrics(prometheus.NewRegistry(), r)
	if err != nil {
		tb.Fatal(err)
	}
	r.metrics = m
	r.cfg.OnPublish = poller.Progress
	return r
}

// inflightPipeline is a pipeline of r into snk over the default outbox table, its
// relation message handled.
func inflightPipeline(tb testing.TB, r *Relay, snk sink.Sink) (*pipeline, *replication.Watermark) {
	shape := catalog.DefaultShape("outbox_events")
	tables := []table{{TableConfig: TableConfig{Table: "outbox_events"}, shape: shape, name: shape.Qualified()}}
	dec := decoder.NewTables([]decoder.Table{{Schema: shape.Schema, Name: shape.Name, Columns: shape.Columns}})
	wm := replication.NewWatermark(r.window, 0)
	p := &pipeline{dec: dec, wm: wm, d: atLeastOnce{r.publisher(snk, nil)}, tables: tables}
	if err := p.HandleWAL(context.Background(), pgoutputRelation()); err != nil {
		tb.Fatal(err)
	}
	return p, wm
}

// fillWindow hands n events (200-byte payloads, 100 per transaction, as the drain
// writes them) through p and returns the last transaction's commit LSN.
func fillWindow(tb testing.TB, p *pipeline, n int) uint64 {
	ctx := context.Background()
	commit := time.Now()
	var begin, end []byte
	lsn := uint64(1 << 20)
	for i := range n {
		if i%100 == 0 {
			lsn += 1 << 16
			if begin = pgoutputBegin(begin[:0], lsn, commit, uint32(i)); p.HandleWAL(ctx, begin) != nil {
				tb.Fatal("begin")
			}
		}
		insert := pgoutputInsert(fmt.Sprintf("0b7e5c4a-3f1d-4e2b-9a8c-%012d", i), "order", fmt.Sprintf("agg-%d", i%1000),
			"order.created", `{"seq": `+fmt.Sprintf("%10d", i)+`, "pad": "`+fmt.Sprintf("%0170d", 0)+`"}`,
			"2026-12-07 10:31:48.123456+00")
		if err := p.HandleWAL(ctx, insert); err != nil {
			tb.Fatal(err)
		}
		if i%100 == 99 {
			if end = pgoutputCommit(end[:0], lsn, lsn+48, commit); p.HandleWAL(ctx, end) != nil {
				tb.Fatal("commit")
			}
		}
	}
	return lsn
}

// waitSettled waits until every event is settled and every transaction up to the
// one committed at lsn is confirmable: none is lost.
func waitSettled(tb testing.TB, r *Relay, wm *replication.Watermark, lsn uint64) {
	deadline := time.Now().Add(time.Minute)
	for n, _ := r.window.InFlight(); n != 0; n, _ = r.window.InFlight() {
		if time.Now().After(deadline) {
			tb.Fatalf("%d events not settled", n)
		}
		time.Sleep(time.Millisecond)
	}
	if got := wm.Confirmable(); got != pglogrepl.LSN(lsn+48) {
		tb.Fatalf("confirmable %s, want every transaction's end %s", got, pglogrepl.LSN(lsn+48))
	}
}

// liveHeap is the heap's live bytes: after two collections, so that what the
// sync.Pools kept of an earlier round is gone too.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// holdingSink keeps every event's callback until told to answer.
type holdingSink struct{ held []sink.Done }

func (s *holdingSink) Publish(_ *outbox.Event, done sink.Done) { s.held = append(s.held, done) }
func (*holdingSink) Flush(context.Context) error               { return nil }
func (*holdingSink) Ping(context.Context) error                { return nil }
func (*holdingSink) Close()                                    {}

// An inflight is held per event in flight: it fits the allocator's 320-byte size
// class (docs/performance.md, "Memory: where the drain's resident set goes").
func TestInflightSize(t *testing.T) {
	if n := unsafe.Sizeof(inflight{}); n > 320 {
		t.Errorf("an inflight is %d bytes, want at most 320", n)
	}
}
