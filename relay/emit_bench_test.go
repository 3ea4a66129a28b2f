package relay_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/pgcluster"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/migrations"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink/kafka"
)

// BenchmarkTablelessOutbox compares the table-less outbox (outbox.Emit) with the
// table outbox on a backlog of b.N events (200-byte JSON payloads, 100 per
// transaction, 1,000 aggregates) written while the relay is stopped, then drained.
// It reports the WAL the application's transactions wrote per event, the WAL the
// relay caused per event while draining (its bookkeeping, until its graceful stop),
// and the drain rate. After the relay, pg_recvlogical drains the same backlog from a
// slot created beside the relay's, with the relay's pgoutput options, into
// /dev/null: the one slot's ceiling for that kind of event, and the relay's share of
// it (docs/performance.md "Table-less outbox against the table"). A cluster of its
// own, so that no other test's WAL counts.
func BenchmarkTablelessOutbox(b *testing.B) {
	binDir, err := pgcluster.BinDir()
	if err != nil {
		b.Skip("needs local PostgreSQL binaries: " + err.Error())
	}
	ctx := context.Background()
	pg, err := pgcluster.Start(ctx, pgcluster.Options{BinDir: binDir})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pg.Close() })
	dbURL := pg.URL("postgres")
	recvlogical := filepath.Join(pg.BinDir(), "pg_recvlogical")
	if _, err := os.Stat(recvlogical); err != nil {
		b.Skip("needs pg_recvlogical beside the server binaries: " + err.Error())
	}
	if _, err := migrations.Up(ctx, dbURL, nil); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		emit bool
		mode poller.OnPublish
	}{
		{"table-mark", false, poller.Mark},
		{"table-none", false, poller.None},
		{"emit", true, poller.Mark},
	} {
		b.Run(c.name, func(b *testing.B) {
			benchBacklog(b, pg, "bench_"+strings.ReplaceAll(c.name, "-", "_"), c.emit, c.mode)
		})
	}
}

func benchBacklog(b *testing.B, pg *pgcluster.Cluster, slot string, emit bool, mode poller.OnPublish) {
	ctx := context.Background()
	dbURL := pg.URL("postgres")
	conn := testenv.Connect(b, dbURL)
	if _, err := conn.Exec(ctx, "TRUNCATE outbox_events"); err != nil {
		b.Fatal(err)
	}
	broker := testenv.Kafka(b)
	consumer := testenv.NewConsumer(b, broker.ListenAddrs(), `outbox\.event\..*`)
	run := func() (stop func()) {
		snk, err := kafka.New(kafka.Config{Brokers: broker.ListenAddrs()})
		if err != nil {
			b.Fatal(err)
		}
		cfg := relay.DefaultConfig()
		cfg.DatabaseURL, cfg.Sink, cfg.Slot, cfg.OnPublish = dbURL, snk, slot, mode
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		r, err := relay.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.Run(runCtx) }()
		return func() {
			cancel() // a graceful stop settles the bookkeeping
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			snk.Close()
		}
	}
	// A first run creates the slot and sees one event through.
	stop := run()
	warm := testenv.WriteTx(b, conn, []string{"w"}, "warm", 1, false)
	if !consumer.WaitDistinct(time.Minute, len(warm)) {
		b.Fatal("relay did not start")
	}
	waitCatchupRecorded(b, conn, slot)
	stop()
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		b.Fatal(err)
	}
	recvSlot := slot + "_recv" // from here on: the backlog, as the relay's slot
	if _, err := conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", recvSlot); err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()
	b.StopTimer()
	before := testenv.InsertLSN(b, conn)
	for written := 0; written < b.N; written += 100 {
		if n := min(100, b.N-written); emit {
			emitBatch(b, conn, written, n)
		} else if _, err := conn.Exec(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
			SELECT 'order', 'agg-' || ((g + $2) % 1000), 'order.created', jsonb_build_object('pad', repeat('x', 180))
			FROM generate_series(1, $1) g`, n, written); err != nil {
			b.Fatal(err)
		}
	}
	written := testenv.InsertLSN(b, conn)
	b.StartTimer()
	stop = run()
	if !consumer.WaitDistinct(10*time.Minute, b.N+1) {
		b.Fatalf("delivered %d of %d", consumer.Distinct(), b.N+1)
	}
	b.StopTimer()
	stop()
	// The next case's slot streams the same table: this one lets go of it.
	defer execSQL(b, conn, "DELETE FROM walrelay_table_slots WHERE slot_name = $1", slot)
	defer dropSlot(b, conn, slot)
	relayWAL := testenv.InsertLSN(b, conn) - written
	relayRate := float64(b.N) / b.Elapsed().Seconds()
	recvRate := float64(b.N) / drainRecvlogical(b, pg, recvSlot, written).Seconds()
	if _, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", recvSlot); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(written-before)/float64(b.N), "WAL-B/event")
	b.ReportMetric(float64(relayWAL)/float64(b.N), "relay-WAL-B/event")
	b.ReportMetric(relayRate, "events/s")
	b.ReportMetric(recvRate, "recvlogical-events/s")
	b.ReportMetric(relayRate/recvRate, "of-recvlogical")
}

// drainRecvlogical streams slot with pg_recvlogical into /dev/null up to end, with
// the options the relay starts replication with (replication.Conn.Stream: protocol
// 1, the walrelay publication, logical messages where the server has them), and
// returns how long it took.
func drainRecvlogical(b *testing.B, pg *pgcluster.Cluster, slot string, end pglogrepl.LSN) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	args := []string{"-h", "127.0.0.1", "-p", strconv.Itoa(pg.Port()), "-U", "postgres", "-d", "postgres",
		"--slot", slot, "--start", "--no-loop", "--endpos", end.String(), "-f", "/dev/null",
		"-P", "pgoutput", "-o", "proto_version=1", "-o", "publication_names=walrelay"}
	if pg.ServerVersionNum() >= replication.MessagesMajor*10000 {
		args = append(args, "-o", "messages=true")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(pg.BinDir(), "pg_recvlogical"), args...)
	started := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("pg_recvlogical: %v: %s", err, out)
	}
	return time.Since(started)
}

// emitBatch emits n events in one transaction, in one round trip.
func emitBatch(b *testing.B, conn *pgx.Conn, from, n int) {
	ctx := context.Background()
	payload := []byte(`{"pad": "` + strings.Repeat("x", 180) + `"}`)
	tx, err := conn.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(ctx)
	batch := &pgx.Batch{}
	for i := range n {
		ev := outbox.Event{ID: newBenchID(from + i), AggregateType: "order", AggregateID: fmt.Sprintf("agg-%d", (from+i+1)%1000),
			EventType: "order.created", Payload: payload, CreatedAt: time.Now()}
		batch.Queue("SELECT pg_logical_emit_message(true, $1, $2::bytea)", outbox.DefaultMessagePrefix, outbox.MarshalMessage(&ev, ""))
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		b.Fatal(err)
	}
}

// newBenchID is a distinct UUID per event of the benchmark.
func newBenchID(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012x", i) }
