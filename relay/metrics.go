package relay

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/walrelay/walrelay/internal/buildinfo"
)

// metrics are the relay's Prometheus metrics: the article's names with its meaning,
// plus slot health, delivery latency and the relay's own state.
type metrics struct {
	published     prometheus.Counter
	failed        *prometheus.CounterVec
	batchDuration prometheus.Histogram
	deadLetters   prometheus.Gauge
	deadLettered  *prometheus.CounterVec
	commitToAck   prometheus.Histogram
	confirmedLSN  prometheus.Gauge
	lastConfirm   prometheus.Gauge
	leader        prometheus.Gauge
	reconnects    prometheus.Counter
	slotsReplaced prometheus.Counter
	stalled       prometheus.Gauge
	paused        prometheus.Gauge
	brokerUp      prometheus.Gauge
	// horizonRecorded is when --on-publish progress last recorded a published horizon.
	horizonRecorded prometheus.Gauge
	// eventsConfirmed is when the confirmed LSN last moved past a transaction with
	// events; lastConfirm moves with idle server positions too.
	eventsConfirmed prometheus.Gauge

	slotConfirmedLag *prometheus.GaugeVec
	slotRestartLag   *prometheus.GaugeVec
	slotSafeWAL      *prometheus.GaugeVec
	slotWALStatus    *prometheus.GaugeVec
	slotActive       *prometheus.GaugeVec
	tableWaiting     *prometheus.GaugeVec
	tableDead        *prometheus.GaugeVec

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
			Name: "walrelay_dead_letters", Help: "Rows given up on after the maximum attempts (the <table>_dead_letters views)."}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "walrelay_dead_lettered_events_total",
			Help: "Events this relay made dead letters, by outbox table: after their last attempt, or at once when no attempt can succeed (each is logged at ERROR)."}, []string{"table"}),
		commitToAck: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "walrelay_commit_to_ack_seconds", Help: "Time from a transaction's commit to the broker's ack of its event.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		confirmedLSN: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_confirmed_lsn", Help: "Last LSN confirmed to PostgreSQL (as a number)."}),
		lastConfirm: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_last_confirm_timestamp_seconds", Help: "Unix time of the last confirmed LSN change."}),
		eventsConfirmed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_events_confirmed_timestamp_seconds",
			Help: "Unix time the confirmed LSN last moved past a transaction with events (idle positions do not count); 0: not since the start."}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_leader", Help: "1 while this instance streams the slot (or polls, in poll mode)."}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "walrelay_reconnects_total", Help: "Replication sessions that failed and were started again."}),
		slotsReplaced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "walrelay_slots_replaced_total", Help: "Slots found lost or missing and created again (with a catch-up pass)."}),
		stalled: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_stalled", Help: "1 when slot lag grows while the confirmed LSN has not moved for the stall timeout."}),
		paused: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_paused", Help: "1 while the relay is paused: it reads and publishes nothing, and keeps the slot."}),
		brokerUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_broker_up",
			Help: "1 while the broker acknowledges events within the ack timeout; 0 while the oldest event in flight waits longer, while the broker does not answer its probe with nothing in flight, or before the broker first answered."}),
		horizonRecorded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "walrelay_published_horizon_timestamp_seconds",
			Help: "Unix time this relay last moved the published horizon (--on-publish progress) forward."}),
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
		tableWaiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "walrelay_table_waiting_rows", Help: "Rows of each outbox table waiting for the poller (walrelay_queued_events counts them all, plus events in flight)."}, []string{"table"}),
		tableDead: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "walrelay_table_dead_letters", Help: "Dead letters of each outbox table (walrelay_dead_letters is their sum)."}, []string{"table"}),
	}
	build := buildinfo.Read()
	for _, c := range []prometheus.Collector{m.published, m.failed, m.batchDuration, m.deadLetters, m.deadLettered, m.commitToAck, m.confirmedLSN,
		m.lastConfirm, m.eventsConfirmed, m.leader, m.reconnects, m.slotsReplaced, m.stalled, m.paused, m.brokerUp, m.horizonRecorded, m.slotConfirmedLag, m.slotRestartLag, m.slotSafeWAL,
		m.slotWALStatus, m.slotActive, m.tableWaiting, m.tableDead,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "walrelay_queued_events", Help: "Rows waiting for the poller plus events received and not yet acked (not the outbox_events_pending view's rows, which are every row not published).",
		}, m.queued(r)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "outbox_events_pending", Help: "Deprecated, removed in the next release: walrelay_queued_events under its old name.",
		}, m.queued(r)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "walrelay_build_info", Help: "1, labelled with the walrelay build that runs.",
			ConstLabels: prometheus.Labels{"version": build.Version, "revision": build.Revision, "goversion": build.GoVersion}},
			func() float64 { return 1 }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "walrelay_inflight_events", Help: "Events handed to the broker and not yet settled."},
			func() float64 { events, _ := r.window.InFlight(); return float64(events) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "walrelay_oldest_inflight_age_seconds",
			Help: "The relay's lag in seconds: how long the oldest event handed to the broker has waited for its answer; 0: none waits."},
			func() float64 { return r.lagSeconds(time.Now()) }),
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

// queued reads walrelay_queued_events: rows waiting for the poller, from the last
// stats query, plus the events in flight.
func (m *metrics) queued(r *Relay) func() float64 {
	return func() float64 {
		events, _ := r.window.InFlight()
		return float64(m.waitingRows.Load() + events)
	}
}

// newRegistry is the binary's registry: the relay's metrics plus Go runtime and
// process collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
