package relay_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/sink/kafka"
)

// BenchmarkStandbyDrain drains a backlog of b.N rows (1,000 per transaction)
// written on a primary that has a streaming standby, once with the slot on the
// primary and once with it on the standby (--primary-url), and reports the CPU the
// walsenders of each server spent during the drain: decoding on the standby is
// meant to take the logical walsender's work off the primary. Linux only (/proc).
func BenchmarkStandbyDrain(b *testing.B) {
	for _, from := range []string{"primary", "standby"} {
		b.Run("from="+from, func(b *testing.B) { benchStandbyDrain(b, from == "standby") })
	}
}

func benchStandbyDrain(b *testing.B, fromStandby bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	p := startStandbyPair(b, ctx, standbyBinaries(b))
	cfg := relay.DefaultConfig()
	cfg.DatabaseURL, cfg.Slot = p.primary.URL("postgres"), "bench"
	if fromStandby {
		cfg.DatabaseURL, cfg.PrimaryURL = p.standby.URL("postgres"), p.primary.URL("postgres")
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	run := func() (stop func()) {
		snk, err := kafka.New(kafka.Config{Brokers: p.broker.ListenAddrs()})
		if err != nil {
			b.Fatal(err)
		}
		c := cfg
		c.Sink = snk
		r, err := relay.New(c)
		if err != nil {
			b.Fatal(err)
		}
		rctx, stopRelay := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx) }()
		return func() {
			stopRelay()
			if err := <-done; err != nil {
				b.Error(err)
			}
			snk.Close()
		}
	}
	// The slot exists and is idle before the backlog is written.
	stop := run()
	if !p.consumer.WaitDistinct(2*time.Minute, len(testenv.WriteTx(b, p.onPrimary, []string{"w"}, "warm", 1, false))) {
		b.Fatal("the relay did not start")
	}
	waitCatchupRecorded(b, p.onPrimary, "bench")
	stop()
	for written := 0; written < b.N; written += 1000 {
		if _, err := p.onPrimary.Exec(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
			SELECT 'order', 'agg-' || (g % 1000), 'order.created', jsonb_build_object('pad', repeat('x', 180))
			FROM generate_series(1, $1) g`, min(1000, b.N-written)); err != nil {
			b.Fatal(err)
		}
	}
	waitReplayed(b, ctx, p.onPrimary, p.onStandby)

	primaryBefore, standbyBefore := walsenderCPU(b, p.onPrimary), walsenderCPU(b, p.onStandby)
	b.ResetTimer()
	stop = run()
	if !p.consumer.WaitDistinct(5*time.Minute, b.N+1) {
		b.Fatalf("delivered %d of %d", p.consumer.Distinct(), b.N+1)
	}
	b.StopTimer()
	primaryCPU := walsenderCPU(b, p.onPrimary).since(primaryBefore)
	standbyCPU := walsenderCPU(b, p.onStandby).since(standbyBefore)
	stop()
	b.ReportMetric(float64(primaryCPU.Microseconds())/float64(b.N), "primary-walsender-µs/event")
	b.ReportMetric(float64(standbyCPU.Microseconds())/float64(b.N), "standby-walsender-µs/event")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// cpuByPid is the CPU time each of a server's walsenders has used.
type cpuByPid map[int]time.Duration

// since is the CPU the walsenders used after before was read; one that started
// since counts whole.
func (now cpuByPid) since(before cpuByPid) time.Duration {
	var d time.Duration
	for pid, t := range now {
		d += t - before[pid]
	}
	return d
}

// walsenderCPU reads the CPU time of the server's walsenders from /proc.
func walsenderCPU(b *testing.B, conn *pgx.Conn) cpuByPid {
	b.Helper()
	rows, err := conn.Query(context.Background(), "SELECT pid FROM pg_stat_activity WHERE backend_type = 'walsender'")
	if err != nil {
		b.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		b.Fatal(err)
	}
	out := cpuByPid{}
	for _, pid := range pids {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/stat")
		if err != nil {
			continue // ended since
		}
		// Fields after the command's closing parenthesis: state is the first, utime
		// the 12th and stime the 13th, in clock ticks (USER_HZ, 100 on Linux).
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 13 {
			continue
		}
		utime, _ := strconv.Atoi(fields[11])
		stime, _ := strconv.Atoi(fields[12])
		out[int(pid)] = time.Duration(utime+stime) * 10 * time.Millisecond
	}
	return out
}
