package relay_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/internal/testregistry"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/schemaregistry"
	"github.com/walrelay/walrelay/sink/kafka"
)

// BenchmarkOnPublish streams b.N events (200-byte payloads, 100 per transaction)
// under each --on-publish mode and reports the WAL written per event, the
// bookkeeping's cost being the difference to "none". Run it alone (make bench): the
// WAL position is the whole cluster's.
func BenchmarkOnPublish(b *testing.B) {
	for _, mode := range []poller.OnPublish{poller.None, poller.Progress, poller.Mark, poller.Delete} {
		b.Run(string(mode), func(b *testing.B) {
			benchStream(b, "bench_"+string(mode), func(c *relay.Config) { c.OnPublish = mode })
		})
	}
}

// BenchmarkConfirmedRecord reports the WAL of one write of the record of what the
// relay confirmed (walrelay_confirmed: an upsert of the slot's one row and its commit),
// which every at-least-once mode makes at most once per --progress-interval while
// events are confirmed: what it adds to --on-publish none's WAL per event is this
// divided by the events of an interval. Run it alone: the WAL position is the whole
// cluster's.
func BenchmarkConfirmedRecord(b *testing.B) {
	ctx := context.Background()
	dbURL := testenv.MigratedDatabase(b)
	conn := testenv.Connect(b, dbURL)
	var created time.Time
	if err := conn.QueryRow(ctx, "INSERT INTO walrelay_slots (slot_name, created_at) VALUES ('bench_record', now()) RETURNING created_at").
		Scan(&created); err != nil {
		b.Fatal(err)
	}
	here := catalog.Origin{System: "1", Database: "bench", Slot: "bench_record", SlotCreated: created, Timeline: 1}
	b.ResetTimer()
	before := testenv.CurrentLSN(b, conn)
	for i := range b.N {
		if ok, err := catalog.RecordConfirmed(ctx, conn, here, before+pglogrepl.LSN(i+1)); err != nil || !ok {
			b.Fatalf("record %d: written %v, %v", i, ok, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(testenv.CurrentLSN(b, conn)-before)/float64(b.N), "WAL-B/record")
}

// BenchmarkRetirement reports the WAL of retiring b.N published rows with
// --on-publish progress (poller.Store.DeletePublished, 10,000 rows a statement),
// which comes on its own, long after the drain BenchmarkOnPublish measures.
func BenchmarkRetirement(b *testing.B) {
	ctx := context.Background()
	dbURL := testenv.MigratedDatabase(b)
	conn := testenv.Connect(b, dbURL)
	if _, err := conn.Exec(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at)
		SELECT 'order', 'agg-' || (g % 1000), 'order.created', jsonb_build_object('pad', repeat('x', 180)), now() - interval '8 days'
		FROM generate_series(1, $1) g`, b.N); err != nil {
		b.Fatal(err)
	}
	publishedUpToNow(ctx, b, conn, "bench_retire")
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	store := poller.NewStore(pool, catalog.DefaultShape("outbox_events"), poller.DefaultPolicy())
	b.ResetTimer()
	before := testenv.CurrentLSN(b, conn)
	n, err := store.DeletePublished(ctx, 7*24*time.Hour, 10000)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if n != int64(b.N) {
		b.Fatalf("retired %d of %d rows", n, b.N)
	}
	b.ReportMetric(float64(testenv.CurrentLSN(b, conn)-before)/float64(b.N), "WAL-B/row")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkStatusPending reports what counting the pending rows with the derived
// rule of --on-publish progress costs (walrelay status, the pending view): one
// count over a table of 200,000 rows below the horizon, b.N times.
func BenchmarkStatusPending(b *testing.B) {
	const rows = 200000
	ctx := context.Background()
	dbURL := testenv.MigratedDatabase(b)
	conn := testenv.Connect(b, dbURL)
	if _, err := conn.Exec(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
		SELECT 'order', 'agg-' || (g % 1000), 'order.created', jsonb_build_object('pad', repeat('x', 180))
		FROM generate_series(1, $1) g`, rows); err != nil {
		b.Fatal(err)
	}
	publishedUpToNow(ctx, b, conn, "bench_status")
	b.ResetTimer()
	for range b.N {
		var pending int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox_events_pending").Scan(&pending); err != nil {
			b.Fatal(err)
		}
		if pending != 0 {
			b.Fatalf("%d pending, want 0", pending)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rows, "ns/row")
}

// BenchmarkDelivery compares the stream's throughput with at-least-once and
// exactly-once delivery (Kafka transactions), in one run.
func BenchmarkDelivery(b *testing.B) {
	for _, d := range []relay.Delivery{relay.AtLeastOnce, relay.ExactlyOnce} {
		b.Run(string(d), func(b *testing.B) {
			benchStream(b, "bench_"+strings.ReplaceAll(string(d), "-", "_"), func(c *relay.Config) { c.Delivery = d })
		})
	}
}

// BenchmarkStreamTracing compares the stream's throughput with tracing off and on
// (an SDK provider batching every event's span to an exporter that drops them).
func BenchmarkStreamTracing(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[on]
		b.Run(name, func(b *testing.B) {
			benchStream(b, "bench_tracing_"+name, func(c *relay.Config) {
				if on {
					tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
					b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
					c.TracerProvider = tp
				}
			})
		})
	}
}

// benchStream streams b.N events through a relay configured by tweak and reports
// events/s and WAL bytes per event.
func benchStream(b *testing.B, slot string, tweak func(*relay.Config)) {
	{
		{
			dbURL := testenv.MigratedDatabase(b)
			broker := testenv.Kafka(b)
			conn := testenv.Connect(b, dbURL)
			snk, err := kafka.New(kafka.Config{Brokers: broker.ListenAddrs()})
			if err != nil {
				b.Fatal(err)
			}
			defer snk.Close()
			cfg := relay.DefaultConfig()
			cfg.DatabaseURL, cfg.Sink = dbURL, snk
			cfg.Slot = slot
			tweak(&cfg)
			cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			r, err := relay.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx) }()
			consumer := testenv.NewConsumer(b, broker.ListenAddrs(), `outbox\.event\..*`)
			warm := testenv.WriteTx(b, conn, []string{"w"}, "warm", 1, false)
			if !consumer.WaitDistinct(time.Minute, len(warm)) {
				b.Fatal("relay did not start")
			}

			b.ResetTimer()
			before := testenv.CurrentLSN(b, conn)
			for written := 0; written < b.N; written += 100 {
				if _, err := conn.Exec(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
					SELECT 'order', 'agg-' || (g % 1000), 'order.created', jsonb_build_object('pad', repeat('x', 180))
					FROM generate_series(1, $1) g`, min(100, b.N-written)); err != nil {
					b.Fatal(err)
				}
			}
			if !consumer.WaitDistinct(5*time.Minute, b.N+1) {
				b.Fatalf("delivered %d of %d", consumer.Distinct(), b.N+1)
			}
			cancel() // a graceful stop settles the bookkeeping
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			wal := testenv.CurrentLSN(b, conn) - before
			b.ReportMetric(float64(wal)/float64(b.N), "WAL-B/event")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		}
	}
}

// BenchmarkBacklogDrain drains a backlog of b.N rows (100 per transaction, 10,000
// aggregates) with the stream and --on-publish none, then with poll mode (mark), in
// one run: poll mode's rate is read as a ratio of the stream's. -benchtime 200000x
// is the size make bench's modes scenario drains.
func BenchmarkBacklogDrain(b *testing.B) {
	b.Run("stream-none", func(b *testing.B) {
		benchDrain(b, "drain_stream", func(c *relay.Config) { c.OnPublish = poller.None })
	})
	b.Run("poll-mark", func(b *testing.B) {
		benchDrain(b, "drain_poll", func(c *relay.Config) { c.Mode = relay.ModePoll })
	})
	// The JSON converter over the expanded payload, the baseline of the Avro one.
	b.Run("stream-none-json-expand", func(b *testing.B) {
		benchDrain(b, "drain_stream_json_expand", func(c *relay.Config) {
			c.OnPublish = poller.None
			c.Format = &record.Format{KeyConverter: record.JSON, ValueConverter: record.JSON,
				ExpandJSON: record.ExpandJSON{Enabled: true, PayloadColumn: "payload"}}
		})
	})
	// Avro keys and values through the tests' registry, the ids cached after the
	// first event of each shape: the payload as io.debezium.data.Json, then
	// expanded into a record.
	for _, expand := range []bool{false, true} {
		name := map[bool]string{false: "stream-none-avro", true: "stream-none-avro-expand"}[expand]
		b.Run(name, func(b *testing.B) {
			reg := testregistry.Start()
			b.Cleanup(reg.Close)
			benchDrain(b, "drain_"+strings.ReplaceAll(name, "-", "_"), func(c *relay.Config) {
				c.OnPublish = poller.None
				client, err := schemaregistry.New(schemaregistry.Config{URLs: []string{reg.URL()}, AutoRegister: true})
				if err != nil {
					b.Fatal(err)
				}
				c.Format = &record.Format{KeyConverter: record.Avro, ValueConverter: record.Avro,
					ExpandJSON: record.ExpandJSON{Enabled: expand, PayloadColumn: "payload"},
					Schemas:    &record.Schemas{Topic: func(e *outbox.Event) string { return "outbox.event." + e.AggregateType }}}
				c.SchemaRegistry = client
			})
		})
	}
}

// benchDrain writes b.N rows while no relay runs (after a first run created the slot,
// in stream mode), then times a relay configured by tweak until every row is consumed.
func benchDrain(b *testing.B, slot string, tweak func(*relay.Config)) {
	dbURL := testenv.MigratedDatabase(b)
	broker := testenv.Kafka(b)
	conn := testenv.Connect(b, dbURL)
	consumer := testenv.NewConsumer(b, broker.ListenAddrs(), `outbox\.event\..*`)
	run := func() (stop func()) {
		cfg := relay.DefaultConfig()
		tweak(&cfg)
		kcfg := kafka.Config{Brokers: broker.ListenAddrs(), MaxBufferedEvents: 2*b.N + 100_000}
		if cfg.Format != nil {
			kcfg.Format = *cfg.Format // the registry converters' cache is shared
		}
		snk, err := kafka.New(kcfg)
		if err != nil {
			b.Fatal(err)
		}
		cfg.DatabaseURL, cfg.Sink, cfg.Slot = dbURL, snk, slot
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		r, err := relay.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		return func() {
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			snk.Close()
		}
	}
	warm := testenv.WriteTx(b, conn, []string{"w"}, "warm", 1, false)
	stop := run()
	if !consumer.WaitDistinct(time.Minute, len(warm)) {
		b.Fatal("relay did not start")
	}
	streamed := relay.DefaultConfig()
	tweak(&streamed)
	if streamed.Mode != relay.ModePoll { // poll mode has no slot
		waitCatchupRecorded(b, conn, slot)
	}
	stop()
	if _, err := conn.Exec(context.Background(), fmt.Sprintf(`DO $$ BEGIN FOR t IN 0..%[1]d / 100 LOOP
		INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
		SELECT 'order', 'agg-' || (g %% 10000), 'order.created', jsonb_build_object('seq', g, 'pad', repeat('x', 180))
		FROM generate_series(t * 100, least(t * 100 + 99, %[1]d)) g;
		COMMIT; END LOOP; END $$`, b.N-1)); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), "VACUUM ANALYZE outbox_events"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	stop = run()
	if !consumer.WaitDistinct(10*time.Minute, b.N+1) {
		b.Fatalf("delivered %d of %d", consumer.Distinct()-1, b.N)
	}
	b.StopTimer()
	stop()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// waitCatchupRecorded waits until slot's catch-up pass is recorded as done. The
// warm-up event a first run sees through may come from that pass, and a run
// stopped before the record makes the next one repeat the pass, which would drain
// the timed backlog too.
func waitCatchupRecorded(b *testing.B, conn *pgx.Conn, slot string) {
	b.Helper()
	testenv.WaitFor(b, time.Minute, "the catch-up pass of slot "+slot+" to be recorded", func() bool {
		var done bool
		err := conn.QueryRow(context.Background(),
			"SELECT catchup_done_at IS NOT NULL FROM walrelay_slots WHERE slot_name = $1", slot).Scan(&done)
		return err == nil && done
	})
}

// publishedUpToNow records, for slot, a published horizon that covers every row
// written so far, as a relay that confirmed them would, then vacuums the table.
func publishedUpToNow(ctx context.Context, b *testing.B, conn *pgx.Conn, slot string) {
	b.Helper()
	if _, err := conn.Exec(ctx, `INSERT INTO walrelay_slots (slot_name, catchup_done_at) VALUES ($1, now())`, slot); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO walrelay_progress (slot_name, table_oid, slot_created_at, published_xid, confirmed_lsn)
		SELECT slot_name, 'outbox_events'::regclass, created_at, pg_snapshot_xmin(pg_current_snapshot()), pg_current_wal_insert_lsn()
		FROM walrelay_slots WHERE slot_name = $1`, slot); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "VACUUM (ANALYZE) outbox_events"); err != nil {
		b.Fatal(err)
	}
}
