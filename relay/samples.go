package relay

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The console's charts (docs/operations.md, "Console") read the relay's figures
// over the last hour without asking PostgreSQL: one Sample is taken at the end of
// each stats pass (stats.go), on the tick the relay already has, into a ring of
// fixed size per relay. It adds no wake-up and no query.

// sampleWindow is how far back the ring reaches.
const sampleWindow = time.Hour

// maxSamples bounds the ring whatever the stats interval: 3,600 samples of
// sampleBytes each (about 253 KiB) at a stats interval of a second or less.
const maxSamples = 3600

// sampleBytes is the size of a Sample in the ring (TestSampleSize), for the
// memory docs/performance.md counts against the RSS goal.
const sampleBytes = 72

// Sample is the relay's figures at the end of one stats pass.
type Sample struct {
	At time.Time `json:"at"`
	// EventsPerSecond are the events the broker acknowledged since the previous
	// sample, per second.
	EventsPerSecond float64 `json:"events_per_second"`
	// AckLatencySeconds is the mean time from commit to the broker's ack of the
	// events acknowledged since the previous sample; 0 when none was.
	AckLatencySeconds float64 `json:"ack_latency_seconds"`
	// LagBytes is the slot's confirmed lag (walrelay_slot_confirmed_lag_bytes); 0
	// in poll mode.
	LagBytes int64 `json:"lag_bytes"`
	// LagSeconds is the relay's lag in seconds (walrelay_oldest_inflight_age_seconds):
	// how long the oldest event it received and handed to the broker has waited for
	// the broker's acknowledgement, 0 when every one is acknowledged. See lagSeconds.
	LagSeconds float64 `json:"lag_seconds"`
	// Pending is walrelay_queued_events: rows waiting for the poller plus events in
	// flight.
	Pending int64 `json:"pending"`
	// DeadLetters is walrelay_dead_letters as the stats pass read it.
	DeadLetters int64 `json:"dead_letters"`
}

// sampleRing keeps the newest samples, oldest overwritten first.
type sampleRing struct {
	mu struct {
		sync.Mutex
		buf  []Sample // allocated once, at its full size
		next int      // where the next sample goes
		n    int      // samples held, up to len(buf)
		// published and ackSum/ackCount are the counters at the previous sample.
		published, ackSum float64
		ackCount          uint64
	}
}

// ringSize is how many samples cover sampleWindow at interval, within [1, maxSamples].
func ringSize(interval time.Duration) int {
	if interval <= 0 {
		return maxSamples
	}
	n := int((sampleWindow + interval - 1) / interval)
	return min(max(n, 1), maxSamples)
}

func newSampleRing(interval time.Duration) *sampleRing {
	s := &sampleRing{}
	s.mu.buf = make([]Sample, ringSize(interval))
	return s
}

// add records a sample built from the counters' values now: published (events
// acknowledged) and the commit-to-ack histogram's sum and count.
func (s *sampleRing) add(at time.Time, published, ackSum float64, ackCount uint64, lag int64, lagSeconds float64, pending, dead int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	smp := Sample{At: at.UTC(), LagBytes: lag, LagSeconds: lagSeconds, Pending: pending, DeadLetters: dead}
	if s.mu.n > 0 {
		prev := s.mu.buf[(s.mu.next+len(s.mu.buf)-1)%len(s.mu.buf)]
		if secs := at.Sub(prev.At).Seconds(); secs > 0 && published >= s.mu.published {
			smp.EventsPerSecond = (published - s.mu.published) / secs
		}
		if ackCount > s.mu.ackCount {
			smp.AckLatencySeconds = (ackSum - s.mu.ackSum) / float64(ackCount-s.mu.ackCount)
		}
	}
	s.mu.published, s.mu.ackSum, s.mu.ackCount = published, ackSum, ackCount
	s.mu.buf[s.mu.next] = smp
	s.mu.next = (s.mu.next + 1) % len(s.mu.buf)
	s.mu.n = min(s.mu.n+1, len(s.mu.buf))
}

// since returns the samples taken after t, oldest first.
func (s *sampleRing) since(t time.Time) []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Samples are in time order: skip those up to t, then copy the rest. A console
	// asks for what came since its last poll, none or one sample, so nothing is
	// allocated for the hour it already has.
	start := (s.mu.next - s.mu.n + len(s.mu.buf)) % len(s.mu.buf)
	skip := 0
	for skip < s.mu.n && !s.mu.buf[(start+skip)%len(s.mu.buf)].At.After(t) {
		skip++
	}
	out := make([]Sample, s.mu.n-skip)
	for i := range out {
		out[i] = s.mu.buf[(start+skip+i)%len(s.mu.buf)]
	}
	return out
}

// latest is the newest sample, and false before the first.
func (s *sampleRing) latest() (Sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.n == 0 {
		return Sample{}, false
	}
	return s.mu.buf[(s.mu.next+len(s.mu.buf)-1)%len(s.mu.buf)], true
}

// lagSeconds is the relay's lag in seconds at now (docs/operations.md, "Metrics"):
// the age of the oldest event received and not yet acknowledged by the broker, 0
// when caught up. It is what the ack clock already keeps (ackclock.go), dated to
// within its epoch of a second, and costs no query: an event is handed to the broker
// as it is received, and confirmed at the next status update once acknowledged, so
// its wait for the broker is the relay's own delay. A backlog the relay has not read
// yet shows in the slot's lag in bytes, not here.
func (r *Relay) lagSeconds(now time.Time) float64 {
	age, _ := r.acks.oldest(now)
	return age.Seconds()
}

// sample takes one sample of r's figures: called at the end of each stats pass.
func (r *Relay) sample(lag int64) { r.sampleAt(time.Now(), lag) }

func (r *Relay) sampleAt(now time.Time, lag int64) {
	var published, hist dto.Metric
	_ = r.metrics.published.(prometheus.Metric).Write(&published)
	_ = r.metrics.commitToAck.(prometheus.Metric).Write(&hist)
	var dead dto.Metric
	_ = r.metrics.deadLetters.(prometheus.Metric).Write(&dead)
	events, _ := r.window.InFlight()
	r.samples.add(now, published.GetCounter().GetValue(), hist.GetHistogram().GetSampleSum(),
		hist.GetHistogram().GetSampleCount(), lag, r.lagSeconds(now), r.metrics.waitingRows.Load()+int64(events), int64(dead.GetGauge().GetValue()))
}

// Samples are the relay's samples taken after since, oldest first: at most the
// last hour's, one per stats interval.
func (r *Relay) Samples(since time.Time) []Sample { return r.samples.since(since) }

// LatestSample is the newest sample, and false before the first stats pass ended.
func (r *Relay) LatestSample() (Sample, bool) { return r.samples.latest() }
