package relay_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/relay"
)

// BenchmarkStatusIntervalWork is what the stream does once per status interval
// while events flow, beside the standby status update itself: the table check that
// must pass before a confirmation (catalog.TableWatches.Check, on the books
// connection) and, with --on-publish progress, taking a published-horizon candidate
// (catalog.TakeHorizon, on the pool). It reports the CPU the relay's process
// spends per call (relay-CPU-µs/op), which is what docs/performance.md ("Moderate
// rates: the relay's per-transaction work") divides by the events of an interval;
// ns/op is the round trip to PostgreSQL.
func BenchmarkStatusIntervalWork(b *testing.B) {
	ctx := context.Background()
	dbURL := testenv.MigratedDatabase(b)
	conn := testenv.Connect(b, dbURL)
	watch, err := catalog.WatchTables(ctx, conn, []string{"outbox_events"}, "walrelay", "bench_interval")
	if err != nil {
		b.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"table-check", func() error { return watch.Check(ctx, conn) }},
		{"take-horizon", func() error { _, err := catalog.TakeHorizon(ctx, pool); return err }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if err := tc.call(); err != nil { // statements prepared, connections open
				b.Fatal(err)
			}
			before := relay.CPUUsed(b)
			for b.Loop() {
				if err := tc.call(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((relay.CPUUsed(b)-before).Microseconds())/float64(b.N), "relay-CPU-µs/op")
		})
	}
}
