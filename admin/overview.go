package admin

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/walrelay/walrelay/internal/buildinfo"
	"github.com/walrelay/walrelay/ops"
	"github.com/walrelay/walrelay/relay"
)

// overview is GET /overview's answer: what the console polls (docs/operations.md,
// "Console"). It is read from what the relay keeps in memory, its state and the
// samples its stats pass takes (relay/samples.go), and never from the database: a
// console left open adds no query.
type overview struct {
	Database string         `json:"database,omitempty"`
	State    ops.RelayState `json:"state"`
	// Reason is the relay's own word on its state: /readyz's answer.
	Reason      string     `json:"reason"`
	Paused      bool       `json:"paused"`
	PausedSince *time.Time `json:"paused_since,omitempty"`
	PauseReason string     `json:"pause_reason,omitempty"`
	// StatsIntervalSeconds is how often a sample is taken.
	StatsIntervalSeconds float64 `json:"stats_interval_seconds"`
	// Latest is the newest sample; absent before the first stats pass ended.
	Latest *relay.Sample `json:"latest,omitempty"`
	// Samples are those after ?since (RFC 3339), oldest first: the last hour's
	// without it.
	Samples []relay.Sample   `json:"samples"`
	Sink    *ops.SinkStatus  `json:"sink"`
	Build   *ops.BuildStatus `json:"build"`
}

func (a *relayAPI) serveOverview(w http.ResponseWriter, req *http.Request) {
	var since time.Time
	if v := req.URL.Query().Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, adminError{"since: want an RFC 3339 time such as 2026-01-02T15:04:05Z, got " + strconv.Quote(v)})
			return
		}
		since = t
	}
	r := a.r
	_, why := r.Ready()
	o := overview{Database: a.name, State: relayState(r), Reason: why,
		StatsIntervalSeconds: r.Config().StatsInterval.Seconds(), Samples: r.Samples(since),
		Sink: sinkStatus(r), Build: buildStatus()}
	if ps := r.PauseState(); ps.Paused {
		o.Paused, o.PauseReason = true, ps.Reason
		if !ps.Since.IsZero() {
			o.PausedSince = &ps.Since
		}
	}
	if s, ok := r.LatestSample(); ok {
		o.Latest = &s
	}
	writeJSON(w, http.StatusOK, o)
}

// relayState is what r does now, in one word: a pause first (an operator's
// choice), then waiting as a standby, then what keeps it from being ready.
func relayState(r *relay.Relay) ops.RelayState {
	ready, _ := r.Ready()
	switch {
	case r.Paused():
		return ops.StatePaused
	case r.Standby():
		return ops.StateStandby
	case r.BrokerDown() != "":
		return ops.StateBrokerDown
	case r.Stalled():
		return ops.StateStalled
	case ready:
		return ops.StateStreaming
	default:
		return ops.StateNotReady
	}
}

// sinkStatus is where r publishes; the broker addresses were redacted by
// relay.New (internal/redact).
func sinkStatus(r *relay.Relay) *ops.SinkStatus {
	cfg := r.Config()
	brokers := cfg.BrokerAddrs
	if brokers == nil {
		brokers = []string{}
	}
	return &ops.SinkStatus{Kind: cfg.Published.Sink, Brokers: brokers, TopicTemplate: cfg.Published.TopicTemplate}
}

// buildStatus is the build that runs, read once: reading it parses the binary's
// build information, which every poll of an open console would otherwise pay for.
// Callers share the value and must not change it.
var buildStatus = sync.OnceValue(func() *ops.BuildStatus {
	b := buildinfo.Read()
	return &ops.BuildStatus{Version: b.Version, Revision: b.Revision}
})
