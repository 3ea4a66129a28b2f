package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
)

// latencyResult is one fixed-rate load step.
type latencyResult struct {
	TargetRate   int     `json:"target_rate"`
	Seconds      float64 `json:"seconds"`
	Committed    int     `json:"committed"`
	InsertErrors int     `json:"insert_errors"`
	AchievedRate float64 `json:"achieved_rate"`

	// The relay's walrelay_commit_to_ack_seconds, from bucket deltas: each figure is
	// the upper bound of the bucket holding that rank (bucket resolution).
	RelayAcks   int       `json:"relay_acks"`
	RelayP50ms  jsonFloat `json:"relay_commit_to_ack_p50_ms_le"`
	RelayP99ms  jsonFloat `json:"relay_commit_to_ack_p99_ms_le"`
	RelayP999ms jsonFloat `json:"relay_commit_to_ack_p999_ms_le"`
	RelayMaxms  jsonFloat `json:"relay_commit_to_ack_max_ms_le"`

	// Measured by the harness: client-side commit (the INSERT returned) to the record
	// consumed back, exact percentiles.
	Consumed  int       `json:"consumed"`
	Missing   int       `json:"missing"`
	E2EP50ms  jsonFloat `json:"commit_to_consume_p50_ms"`
	E2EP99ms  jsonFloat `json:"commit_to_consume_p99_ms"`
	E2EP999ms jsonFloat `json:"commit_to_consume_p999_ms"`
	E2EMaxms  jsonFloat `json:"commit_to_consume_max_ms"`
	E2ESlow   int       `json:"commit_to_consume_over_10ms"`

	// The row's created_at to the record's timestamp, which the relay sets when it
	// hands the record to the producer: the relay's share of the latency.
	HandoverP50ms  jsonFloat `json:"created_to_handover_p50_ms"`
	HandoverP99ms  jsonFloat `json:"created_to_handover_p99_ms"`
	HandoverP999ms jsonFloat `json:"created_to_handover_p999_ms"`
	HandoverMaxms  jsonFloat `json:"created_to_handover_max_ms"`
	HandoverSlow   int       `json:"created_to_handover_over_10ms"`

	// PerSecond is the tail by the second the events committed in.
	PerSecond []secondTail `json:"per_second"`

	LagStartBytes  int64   `json:"slot_lag_start_bytes"`
	LagEndBytes    int64   `json:"slot_lag_end_bytes"`
	LagMaxBytes    int64   `json:"slot_lag_max_bytes"`
	WALBytesPerSec float64 `json:"wal_bytes_per_sec"`
	LagGrew        bool    `json:"lag_grew"`
	TailSeconds    float64 `json:"tail_seconds"` // load stopped to last record consumed
	Held           bool    `json:"held"`

	RelayCPUMicrosPerEvent float64 `json:"relay_cpu_us_per_event"`
	// RelayWakeups: the relay's read and write system calls and context switches.
	RelayWakeups wakeupsPerEvent `json:"relay_wakeups_per_event"`
	RelayRSSKiB  int64           `json:"relay_rss_kib"` // at the end of the step
	// The walsender's and the whole PostgreSQL server's (commits included) CPU per
	// event, so that a tail can be put where the CPU went.
	WalsenderCPUMicrosPerEvent float64 `json:"walsender_cpu_us_per_event"`
	PostgresCPUMicrosPerEvent  float64 `json:"postgres_cpu_us_per_event"`
	MachineBusy                float64 `json:"machine_busy_fraction"`
	OtherCPUSec                float64 `json:"other_cpu_seconds"` // not the relay's, PostgreSQL's, the broker's or the harness's
	// Floor is the wake-up cycle's own cost at this rate, at the rates with a goal.
	Floor *cycleFloor `json:"cycle_floor,omitempty"`
}

// jsonFloat encodes NaN as null and infinities as strings, which encoding/json
// refuses otherwise.
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return []byte("null"), nil
	case math.IsInf(v, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Inf"`), nil
	}
	return []byte(strconv.FormatFloat(v, 'f', -1, 64)), nil
}

const latencyTopic = "bench.latency.order"

// tracker keeps, per event seq, when its insert committed, when its record was
// consumed, and the row's created_at and the record's hand-over time as the record
// carries them (Unix nanoseconds; 0 unknown).
type tracker struct {
	commitAt   []atomic.Int64
	consumeAt  []atomic.Int64
	createdAt  []atomic.Int64
	handoverAt []atomic.Int64
	consumed   atomic.Int64 // distinct seqs consumed
}

func newTracker(capacity int) *tracker {
	return &tracker{commitAt: make([]atomic.Int64, capacity), consumeAt: make([]atomic.Int64, capacity),
		createdAt: make([]atomic.Int64, capacity), handoverAt: make([]atomic.Int64, capacity)}
}

// consume reads the latency topic until ctx ends, stamping each record's seq with
// the time its fetch returned.
func (t *tracker) consume(ctx context.Context, cl *kgo.Client) {
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		now := time.Now().UnixNano()
		fetches.EachRecord(func(r *kgo.Record) {
			seq, ok := payloadSeq(r.Value)
			if ok && seq >= 0 && seq < len(t.consumeAt) && t.consumeAt[seq].CompareAndSwap(0, now) {
				t.consumed.Add(1)
				t.handoverAt[seq].Store(r.Timestamp.UnixNano())
				if c, ok := headerTime(r, "created_at"); ok {
					t.createdAt[seq].Store(c.UnixNano())
				}
			}
		})
	}
}

// headerTime parses the RFC 3339 time in the record's header key.
func headerTime(r *kgo.Record, key string) (time.Time, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			t, err := time.Parse(time.RFC3339Nano, string(h.Value))
			return t, err == nil
		}
	}
	return time.Time{}, false
}

// payloadSeq finds "seq": N in a payload (jsonb's text form).
func payloadSeq(v []byte) (int, bool) {
	i := bytes.Index(v, []byte(`"seq": `))
	if i < 0 {
		return 0, false
	}
	j := i + len(`"seq": `)
	k := j
	for k < len(v) && v[k] >= '0' && v[k] <= '9' {
		k++
	}
	n, err := strconv.Atoi(string(v[j:k]))
	return n, err == nil
}

// generate inserts single-event transactions at rate per second for dur from
// workers connections, paced by a 1ms ticker, with seqs from first. Inserts due
// after dur are dropped, so a generator that falls behind shows a lower rate.
func (e *env) generate(ctx context.Context, pool *pgxpool.Pool, t *tracker, rate int, dur time.Duration, first int) (committed, failed int) {
	pad := strings.Repeat("x", max(e.opts.payloadBytes-26, 1))
	total := int(float64(rate) * dur.Seconds())
	total = min(total, len(t.commitAt)-first)
	jobs := make(chan int, total)
	start := time.Now()
	stopAt := start.Add(dur)
	var ok, bad atomic.Int64
	var wg sync.WaitGroup
	for range e.opts.workers {
		wg.Go(func() {
			for seq := range jobs {
				if time.Now().After(stopAt) || ctx.Err() != nil {
					continue
				}
				_, err := pool.Exec(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
					VALUES ('order', $1, 'order.created', $2)`,
					"agg-"+strconv.Itoa(seq%e.opts.aggregates), fmt.Sprintf(`{"pad": "%s", "seq": %d}`, pad, seq))
				if err != nil {
					bad.Add(1)
					continue
				}
				t.commitAt[seq].Store(time.Now().UnixNano())
				ok.Add(1)
			}
		})
	}
	ticker := time.NewTicker(time.Millisecond)
	sent := 0
	for sent < total && ctx.Err() == nil {
		now := <-ticker.C
		if now.After(stopAt) {
			break
		}
		due := min(int(float64(rate)*now.Sub(start).Seconds()), total)
		for ; sent < due; sent++ {
			jobs <- first + sent
		}
	}
	ticker.Stop()
	close(jobs)
	wg.Wait()
	return int(ok.Load()), int(bad.Load())
}

// runLatency streams with one relay while the generator inserts at each rate in
// turn, and measures commit-to-ack (the relay's histogram) and commit-to-consume
// (the harness's own consumer).
func (e *env) runLatency(ctx context.Context, run relayRun) (out []latencyResult, idleOut *idleResult, err error) {
	capacity := 1000
	for _, r := range e.opts.rates {
		capacity += int(float64(r)*e.opts.rateDuration.Seconds()) + 1
	}
	t := newTracker(capacity)

	run.topicTemplate = "bench.latency.{aggregate_type}"
	rp, err := e.startRelay(run, "latency")
	if err != nil {
		return nil, nil, err
	}
	defer rp.stop(30 * time.Second)
	if err := rp.waitReady(ctx, time.Minute); err != nil {
		return nil, nil, err
	}

	poolCfg, err := pgxpool.ParseConfig(run.dbURL)
	if err != nil {
		return nil, nil, err
	}
	poolCfg.MaxConns = int32(e.opts.workers)
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, nil, fmt.Errorf("load generator pool: %w", err)
	}
	defer pool.Close()
	// Every connection open before the load: the warm-up's rate needs only one or
	// two, and the others' backends would otherwise start (fork, catalog caches)
	// within the first second of the first rate, on the same two cores.
	if err := openAll(ctx, pool, e.opts.workers); err != nil {
		return nil, nil, err
	}
	mon, err := pgx.Connect(ctx, run.dbURL)
	if err != nil {
		return nil, nil, err
	}
	defer mon.Close(context.Background())

	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokerAt), kgo.ConsumeTopics(latencyTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond),
		kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		return nil, nil, fmt.Errorf("kafka consumer: %w", err)
	}
	consumeCtx, stopConsumer := context.WithCancel(ctx)
	consumerDone := make(chan struct{})
	go func() { t.consume(consumeCtx, cl); close(consumerDone) }()
	defer func() { stopConsumer(); <-consumerDone; cl.Close() }()

	// Warm up: connections, prepared statements, the topic's metadata in both clients.
	progress("  warm-up: 200 events/s for 2s")
	next := 0
	n, _ := e.generate(ctx, pool, t, 200, 2*time.Second, next)
	next += 400
	if !waitConsumed(ctx, t, int64(n), time.Minute) {
		return nil, nil, fmt.Errorf("warm-up: consumed %d of %d events within a minute; relay log: %s", t.consumed.Load(), n, rp.logPath)
	}
	committedSoFar := int64(n)

	if e.opts.idle > 0 {
		progress("  idle: no writes for %s", e.opts.idle)
		idle, err := e.measureIdle(ctx, rp, mon, run.slot, e.opts.idle)
		if err != nil {
			return nil, nil, err
		}
		if d := e.opts.consoleIdle; d > 0 {
			progress("  console: %d rounds of %s with no writes without a console and %s with one", e.opts.consoleRounds, d, d)
			c, err := e.measureConsoleIdle(ctx, rp, d, e.opts.consoleRounds)
			if err != nil {
				return nil, nil, err
			}
			idle.Console = &c
		}
		idleOut = &idle
	}

	for _, target := range e.opts.rates {
		if err := ctx.Err(); err != nil {
			return out, idleOut, err
		}
		progress("  %d events/s for %s", target, e.opts.rateDuration)
		res := latencyResult{TargetRate: target, Seconds: e.opts.rateDuration.Seconds()}
		first := next
		next += int(float64(target)*e.opts.rateDuration.Seconds()) + 1

		res.LagStartBytes, err = slotLag(ctx, mon, run.slot)
		if err != nil {
			return out, idleOut, err
		}
		_, wal0, err := currentLSN(ctx, mon)
		if err != nil {
			return out, idleOut, err
		}
		wal0At := time.Now()
		before, err := rp.scrape(ctx)
		if err != nil {
			return out, idleOut, err
		}
		cpu0, _ := cpuSeconds(rp.pid())
		wsPID := walsenderPID(ctx, mon, run.slot)
		ws0, _ := cpuSeconds(wsPID)
		wake0, _ := readWakeups(rp.pid())
		pg0, broker0 := e.postgresCPU(), brokerCPU(e)
		self0, _ := cpuSeconds(os.Getpid())
		machine := readMachineCPU()

		// Sample the slot's lag while the load runs (on its own connection).
		sampleCtx, stopSampling := context.WithCancel(ctx)
		var lagMax atomic.Int64
		sampler := make(chan struct{})
		go func() {
			defer close(sampler)
			conn, err := pgx.Connect(sampleCtx, run.dbURL)
			if err != nil {
				return
			}
			defer conn.Close(context.Background())
			for sampleCtx.Err() == nil {
				if lag, err := slotLag(sampleCtx, conn, run.slot); err == nil && lag > lagMax.Load() {
					lagMax.Store(lag)
				}
				select {
				case <-sampleCtx.Done():
				case <-time.After(250 * time.Millisecond):
				}
			}
		}()

		traced := make(chan struct{})
		if e.opts.relayTrace != "" {
			go func() {
				defer close(traced)
				path := filepath.Join(e.opts.relayTrace, fmt.Sprintf("relay-trace-%d.out", target))
				if err := rp.trace(ctx, path, min(5*time.Second, e.opts.rateDuration)); err != nil {
					progress("  relay trace: %v", err)
				} else {
					progress("  relay trace of the first seconds: %s (go tool trace)", path)
				}
			}()
		} else if e.opts.relayProfile != "" {
			go func() {
				defer close(traced)
				path := filepath.Join(e.opts.relayProfile, fmt.Sprintf("relay-rate-%d.pprof", target))
				if err := rp.profile(ctx, path, min(10*time.Second, e.opts.rateDuration)); err != nil {
					progress("  relay profile: %v", err)
				} else {
					progress("  relay CPU profile of the first seconds: %s (go tool pprof)", path)
				}
			}()
		} else {
			close(traced)
		}
		loadStart := time.Now()
		res.Committed, res.InsertErrors = e.generate(ctx, pool, t, target, e.opts.rateDuration, first)
		genEnd := time.Now()
		<-traced
		res.LagEndBytes, err = slotLag(ctx, mon, run.slot)
		stopSampling()
		<-sampler
		if err != nil {
			return out, idleOut, err
		}
		_, wal1, err := currentLSN(ctx, mon)
		if err != nil {
			return out, idleOut, err
		}
		res.LagMaxBytes = max(lagMax.Load(), res.LagEndBytes)
		res.AchievedRate = float64(res.Committed) / e.opts.rateDuration.Seconds()
		res.WALBytesPerSec = float64(wal1-wal0) / time.Since(wal0At).Seconds()
		// Grown: at the end, the relay is more than a second of this run's WAL behind
		// where it was at the start.
		res.LagGrew = float64(res.LagEndBytes-res.LagStartBytes) > max(res.WALBytesPerSec, 64<<10)

		committedSoFar += int64(res.Committed)
		if !waitConsumed(ctx, t, committedSoFar, 2*time.Minute) {
			progress("  not everything came back within 2 minutes: %d of %d", t.consumed.Load(), committedSoFar)
		}
		cpu1, _ := cpuSeconds(rp.pid())
		wake1, wakeErr := readWakeups(rp.pid())
		res.RelayRSSKiB, _ = statusKB(rp.pid(), "VmRSS")
		ws1, _ := cpuSeconds(wsPID)
		pg1, broker1 := e.postgresCPU(), brokerCPU(e)
		self1, _ := cpuSeconds(os.Getpid())
		res.MachineBusy = machine.busySince()
		res.OtherCPUSec = max(machine.busyCPUSince()-(cpu1-cpu0)-(pg1-pg0)-(broker1-broker0)-(self1-self0), 0)
		if res.Committed > 0 {
			perEvent := func(s float64) float64 { return s / float64(res.Committed) * 1e6 }
			res.RelayCPUMicrosPerEvent = perEvent(cpu1 - cpu0)
			if wakeErr == nil {
				res.RelayWakeups = wake1.perEvent(wake0, res.Committed)
			}
			if wsPID != 0 {
				res.WalsenderCPUMicrosPerEvent = perEvent(ws1 - ws0)
			}
			res.PostgresCPUMicrosPerEvent = perEvent(pg1 - pg0)
		}
		after, err := rp.scrape(ctx)
		if err != nil {
			return out, idleOut, err
		}
		if err := relayPercentiles(&res, before, after); err != nil {
			return out, idleOut, err
		}
		var lat, handover []float64
		var samples []sample
		var lastConsume int64
		for seq := first; seq < next && seq < len(t.commitAt); seq++ {
			c := t.commitAt[seq].Load()
			if c == 0 {
				continue
			}
			r := t.consumeAt[seq].Load()
			if r == 0 {
				res.Missing++
				continue
			}
			s := sample{commitAt: c, e2eMs: float64(r-c) / 1e6, handoverMs: math.NaN()}
			if cr, h := t.createdAt[seq].Load(), t.handoverAt[seq].Load(); cr != 0 && h != 0 {
				s.handoverMs = max(float64(h-cr)/1e6, 0)
				handover = append(handover, s.handoverMs)
				if s.handoverMs > slowMillis {
					res.HandoverSlow++
				}
			}
			if s.e2eMs > slowMillis {
				res.E2ESlow++
			}
			lat = append(lat, s.e2eMs)
			samples = append(samples, s)
			lastConsume = max(lastConsume, r)
		}
		res.Consumed = len(lat)
		p50, p99, p999, pmax := quantiles(lat)
		res.E2EP50ms, res.E2EP99ms, res.E2EP999ms, res.E2EMaxms = jsonFloat(p50), jsonFloat(p99), jsonFloat(p999), jsonFloat(pmax)
		p50, p99, p999, pmax = quantiles(handover)
		res.HandoverP50ms, res.HandoverP99ms, res.HandoverP999ms, res.HandoverMaxms = jsonFloat(p50), jsonFloat(p99), jsonFloat(p999), jsonFloat(pmax)
		res.PerSecond = perSecond(samples, loadStart)
		if lastConsume > 0 {
			res.TailSeconds = max(time.Unix(0, lastConsume).Sub(genEnd).Seconds(), 0)
		}
		res.Held = res.AchievedRate >= 0.95*float64(target) && !res.LagGrew && res.Missing == 0
		progress("  %d/s: achieved %.0f/s, commit-to-consume p50 %s p99 %s p99.9 %s (%d over 10ms), created-to-handover p99 %s p99.9 %s (%d over 10ms), lag %s -> %s, held: %v",
			target, res.AchievedRate, ms(res.E2EP50ms), ms(res.E2EP99ms), ms(res.E2EP999ms), res.E2ESlow,
			ms(res.HandoverP99ms), ms(res.HandoverP999ms), res.HandoverSlow,
			bytesIEC(res.LagStartBytes), bytesIEC(res.LagEndBytes), res.Held)
		if goalRate(target) && res.AchievedRate > 0 {
			// The stream's bytes per transaction, from the WAL the step wrote: close
			// enough for the floor, whose cost goes with its wake-ups.
			eventBytes := int(res.WALBytesPerSec / res.AchievedRate)
			res.Floor = e.measureCycleFloor(ctx, int(math.Round(res.AchievedRate)), max(eventBytes, 100))
		}
		out = append(out, res)
	}
	if err := rp.stop(30 * time.Second); err != nil {
		return out, idleOut, fmt.Errorf("graceful stop: %w", err)
	}
	return out, idleOut, nil
}

// relayPercentiles fills the relay-side figures from two scrapes.
func relayPercentiles(res *latencyResult, before, after samples) error {
	h0, err := before.histogram("walrelay_commit_to_ack_seconds")
	if err != nil {
		return err
	}
	h1, err := after.histogram("walrelay_commit_to_ack_seconds")
	if err != nil {
		return err
	}
	d := h1.sub(h0)
	res.RelayAcks = int(d.total())
	res.RelayP50ms = jsonFloat(d.quantile(0.50) * 1000)
	res.RelayP99ms = jsonFloat(d.quantile(0.99) * 1000)
	res.RelayP999ms = jsonFloat(d.quantile(0.999) * 1000)
	res.RelayMaxms = jsonFloat(d.max() * 1000)
	return nil
}

func waitConsumed(ctx context.Context, t *tracker, n int64, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for t.consumed.Load() < n {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// openAll holds n connections of pool at once, so that the pool has them all open,
// and reads the outbox table once on each, so that its catalog entries are cached.
func openAll(ctx context.Context, pool *pgxpool.Pool, n int) error {
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("load generator connection: %w", err)
		}
		conns = append(conns, c)
		if _, err := c.Exec(ctx, "SELECT count(*) FROM outbox_events WHERE false"); err != nil {
			return fmt.Errorf("load generator connection: %w", err)
		}
	}
	return nil
}

func brokerCPU(e *env) float64 {
	c, _ := cpuSeconds(e.broker.pid())
	return c
}
