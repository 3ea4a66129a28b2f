package relay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the relay's Prometheus metrics: the article's names with its meaning,
// plus slot health, delivery latency and the relay's own state.
type metrics struct {
	published     prometheus.Counter
	failed        *prometheus.CounterVec
	batchDuration prometheus.Histogram
	deadLetters   prometheus.Gauge
	commitToAck   prometheus.Histogram
	confirmedLSN  prometheus.Gauge
	lastConfirm   prometheus.Gauge
	leader        prometheus.Gauge
	reconnects    prometheus.Counter
	slotsReplaced prometheus.Counter
	stalled       prometheus.Gauge

	slotConfirmedLag *prometheus.GaugeVec
	slotRestartLag   *prometheus.GaugeVec
	slotSafeWAL      *prometheus.GaugeVec
	slotWALStatus    *prometheus.GaugeVec
	slotActive       *prometheus.GaugeVec

	waitingRows atomic.Int64 // rows waiting for the poller, from the last stats query
}

var walStatuses = []string{"reserved", "extended", "unreserved", "lost"}

func newMetrics(reg prometheus.Registerer, r *Relay) (*metrics, error) {
	m := &metrics{
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "outbox_events_published_total", Help: "Outbox events acknowledged by the broker."}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbox_events_failed_total", Help: "Failed publish attempts, by event type."}, []string{"event_type"}),
		batchDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "outbox_batch_duration_seconds", Help: "Duration of poller batches and bookkeeping batches.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12)}),
		deadLetters: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_dead_letters", Help: "Rows given up on after the maximum attempts (outbox_dead_letters)."}),
		commitToAck: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "walrelay_commit_to_ack_seconds", Help: "Time from a transaction's commit to the broker's ack of its event.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		confirmedLSN: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_confirmed_lsn", Help: "Last LSN confirmed to PostgreSQL (as a number)."}),
		lastConfirm: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_last_confirm_timestamp_seconds", Help: "Unix time of the last confirmed LSN change."}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_leader", Help: "1 while this instance streams the slot (or polls, in poll mode)."}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "walrelay_reconnects_total", Help: "Replication sessions that failed and were started again."}),
		slotsReplaced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "walrelay_slots_replaced_total", Help: "Slots found lost or missing and created again (with a catch-up pass)."}),
		stalled: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_stalled", Help: "1 when slot lag grows while the confirmed LSN has not moved for the stall timeout."}),
		slotConfirmedLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "walrelay_slot_confirmed_lag_bytes", Help: "WAL bytes between the server's position and the slot's confirmed_flush_lsn."}, []string{"slot"}),
		slotRestartLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "walrelay_slot_restart_lag_bytes", Help: "WAL bytes the slot retains (server position minus restart_lsn)."}, []string{"slot"}),
		slotSafeWAL: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "walrelay_slot_safe_wal_size_bytes", Help: "WAL bytes that can still be written before the slot is in danger of being lost."}, []string{"slot"}),
		slotWALStatus: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "walrelay_slot_wal_status", Help: "1 for the slot's current wal_status."}, []string{"slot", "status"}),
		slotActive: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "walrelay_slot_active", Help: "1 when a process streams the slot."}, []string{"slot"}),
	}
	for _, c := range []prometheus.Collector{m.published, m.failed, m.batchDuration, m.deadLetters, m.commitToAck, m.confirmedLSN,
		m.lastConfirm, m.leader, m.reconnects, m.slotsReplaced, m.stalled, m.slotConfirmedLag, m.slotRestartLag, m.slotSafeWAL,
		m.slotWALStatus, m.slotActive,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "outbox_events_pending", Help: "Rows waiting for the poller plus events received and not yet acked.",
		}, func() float64 {
			events, _ := r.window.InFlight()
			return float64(m.waitingRows.Load() + events)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "walrelay_inflight_events", Help: "Events handed to the broker and not yet settled."},
			func() float64 { events, _ := r.window.InFlight(); return float64(events) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "walrelay_inflight_bytes", Help: "Bytes of events handed to the broker and not yet settled."},
			func() float64 { _, bytes := r.window.InFlight(); return float64(bytes) }),
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics (one relay per registry; wrap it with "+
				"prometheus.WrapRegistererWith to run several): %w", err)
		}
	}
	return m, nil
}

// newRegistry is the binary's registry: the relay's metrics plus Go runtime and
// process collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// stats reads the slot's health and the table's counts every interval and detects
// a stalled relay: lag growing while the confirmed LSN stands still.
func (r *Relay) stats(ctx context.Context, pool *pgxpool.Pool) error {
	ticker := time.NewTicker(r.cfg.StatsInterval)
	defer ticker.Stop()
	var lastLSN string
	var lastLag int64
	lastMove := time.Now()
	for {
		if err := r.readTableStats(ctx, pool); err != nil && ctx.Err() == nil {
			r.log.Warn("reading outbox stats failed", "err", err)
		}
		if r.cfg.Mode == ModeStream {
			lsn, lag, err := r.readSlotStats(ctx, pool)
			switch {
			case ctx.Err() != nil:
			case err != nil:
				r.log.Warn("reading slot stats failed", "slot", r.cfg.Slot, "err", err)
			case lsn != lastLSN || lag <= lastLag && lag < 1<<20:
				lastLSN, lastLag, lastMove = lsn, lag, time.Now()
				if r.stalled.Swap(false) {
					r.log.Info("relay no longer stalled", "slot", r.cfg.Slot, "confirmed_lsn", lsn)
				}
			case lag > lastLag && time.Since(lastMove) > r.cfg.StallTimeout:
				if !r.stalled.Swap(true) {
					r.log.Error("relay stalled: slot lag grows while the confirmed LSN has not moved; "+
						"check the broker, the relay's logs and walrelay status", "slot", r.cfg.Slot,
						"confirmed_lsn", lsn, "lag_bytes", lag, "since", lastMove.UTC().Format(time.RFC3339))
				}
			}
		}
		if r.stalled.Load() {
			r.metrics.stalled.Set(1)
		} else {
			r.metrics.stalled.Set(0)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

func (r *Relay) readTableStats(ctx context.Context, pool *pgxpool.Pool) error {
	// In stream mode the rows not handed over are in flight (counted by the window)
	// or just not marked yet, so only handed-over rows and dead letters are read, through
	// their small index; in poll mode every unprocessed row waits.
	rows := "processed_at IS NULL AND (retry_after IS NOT NULL OR dead_lettered_at IS NOT NULL)"
	if r.cfg.Mode == ModePoll {
		rows = "processed_at IS NULL"
	}
	var waitingRows, dead int64
	err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE dead_lettered_at IS NULL),
			count(*) FILTER (WHERE dead_lettered_at IS NOT NULL)
		FROM `+pgx.Identifier(splitIdent(r.cfg.Table)).Sanitize()+` WHERE `+rows).Scan(&waitingRows, &dead)
	if err != nil {
		return err
	}
	r.metrics.waitingRows.Store(waitingRows)
	r.metrics.deadLetters.Set(float64(dead))
	return nil
}

// readSlotStats updates the slot gauges; it returns the confirmed LSN and the lag.
func (r *Relay) readSlotStats(ctx context.Context, pool *pgxpool.Pool) (string, int64, error) {
	var active bool
	var walStatus, confirmed *string
	var safe, confirmedLag, restartLag *int64
	err := pool.QueryRow(ctx, `SELECT active, wal_status, safe_wal_size,
			pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint,
			pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint, confirmed_flush_lsn::text
		FROM pg_replication_slots WHERE slot_name = $1`, r.cfg.Slot).
		Scan(&active, &walStatus, &safe, &confirmedLag, &restartLag, &confirmed)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, nil // not created yet
	}
	if err != nil {
		return "", 0, err
	}
	slot := r.cfg.Slot
	r.metrics.slotActive.WithLabelValues(slot).Set(boolFloat(active))
	for _, st := range walStatuses {
		r.metrics.slotWALStatus.WithLabelValues(slot, st).Set(boolFloat(walStatus != nil && *walStatus == st))
	}
	if safe != nil {
		r.metrics.slotSafeWAL.WithLabelValues(slot).Set(float64(*safe))
	}
	var lag int64
	if confirmedLag != nil {
		lag = *confirmedLag
		r.metrics.slotConfirmedLag.WithLabelValues(slot).Set(float64(lag))
	}
	if restartLag != nil {
		r.metrics.slotRestartLag.WithLabelValues(slot).Set(float64(*restartLag))
	}
	var lsn string
	if confirmed != nil {
		lsn = *confirmed
	}
	return lsn, lag, nil
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// serveHTTP serves /metrics, /healthz and /readyz until ctx ends.
func (r *Relay) serveHTTP(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(r.gatherer, promhttp.HandlerOpts{Registry: r.registerer}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		ready, why := r.Ready()
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintln(w, why)
	})
	if r.cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics server: %w", err)
	}
	return nil
}

// Ready reports whether the relay is connected and moving events, and why not.
func (r *Relay) Ready() (bool, string) {
	switch {
	case r.stalled.Load():
		return false, "stalled: slot lag grows while the confirmed LSN does not move"
	case r.standby.Load():
		return false, "standby: another instance streams slot " + r.cfg.Slot
	case !r.active.Load():
		if r.cfg.Mode == ModePoll {
			return false, "not polling: the last poll failed or none ran yet"
		}
		return false, "not streaming: connecting to PostgreSQL or Kafka"
	case r.cfg.Mode == ModePoll:
		return true, "polling"
	default:
		return true, "streaming"
	}
}
