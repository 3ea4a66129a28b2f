package poller_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/sink"
)

// ackingSink acknowledges every event at once: the benchmark measures the poll's
// database side alone.
type ackingSink struct{}

func (ackingSink) Publish(_ *outbox.Event, done sink.Done) { done.Done(nil) }
func (ackingSink) Flush(context.Context) error             { return nil }
func (ackingSink) Ping(context.Context) error              { return nil }
func (ackingSink) Close()                                  {}

// BenchmarkPollBookkeeping polls b.N pending rows (200-byte payloads) in batches
// of 500 with each --on-publish mode poll mode has, on the table as walrelay
// migrate creates it (fillfactor 100) and with fillfactor 50, and reports the WAL
// per row the polls wrote: the row locks and the marks or deletes, with the
// inserts' WAL per row beside it. One worker, no broker: the rate is the
// harness's (bench/, -modes poll:mark). Run it alone: the WAL position is the whole
// cluster's (docs/performance.md, "Poll mode").
func BenchmarkPollBookkeeping(b *testing.B) {
	for _, mode := range []poller.OnPublish{poller.Mark, poller.Delete} {
		for _, fillfactor := range []int{100, 50} {
			b.Run(fmt.Sprintf("%s/fillfactor=%d", mode, fillfactor), func(b *testing.B) {
				benchPoll(b, mode, fillfactor)
			})
		}
	}
}

func benchPoll(b *testing.B, mode poller.OnPublish, fillfactor int) {
	ctx := context.Background()
	dbURL := testenv.MigratedDatabase(b)
	conn := testenv.Connect(b, dbURL)
	if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER TABLE outbox_events SET (fillfactor = %d)", fillfactor)); err != nil {
		b.Fatal(err)
	}
	inserted := testenv.CurrentLSN(b, conn)
	if _, err := conn.Exec(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
		SELECT 'order', 'agg-' || (g % 10000), 'order.created', jsonb_build_object('n', g, 'pad', repeat('x', 180))
		FROM generate_series(1, $1) g`, b.N); err != nil {
		b.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	p := poller.New(pool, ackingSink{}, poller.Config{
		Shape: catalog.DefaultShape("outbox_events"), PollOnly: true, OnPublish: mode,
		Policy: poller.DefaultPolicy(), BatchSize: 500, Interval: time.Second,
		PublishTimeout: time.Minute, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	b.ResetTimer()
	before := testenv.CurrentLSN(b, conn)
	published := 0
	for published < b.N {
		res, err := p.Poll(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if res.Published == 0 {
			b.Fatalf("a poll found nothing after %d of %d rows", published, b.N)
		}
		published += res.Published
	}
	b.StopTimer()
	b.ReportMetric(float64(testenv.CurrentLSN(b, conn)-before)/float64(b.N), "WAL-B/row")
	b.ReportMetric(float64(before-inserted)/float64(b.N), "insert-WAL-B/row")
}
