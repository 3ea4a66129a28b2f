package admin

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/walrelay/walrelay/ops"
)

// maxReplayJobs is how many replays GET /replay/ID remembers, the newest.
const maxReplayJobs = 100

// replayJobs are the replays started over the admin API, by id.
type replayJobs struct {
	mu      sync.Mutex
	jobs    map[string]*ops.ReplayProgress
	filters map[string]ops.ReplayFilter // what each replays, for GET /replay
	order   []string                    // ids, oldest first
}

func (j *replayJobs) set(p ops.ReplayProgress) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.jobs == nil {
		j.jobs = map[string]*ops.ReplayProgress{}
	}
	if _, ok := j.jobs[p.ID]; !ok {
		j.order = append(j.order, p.ID)
		if len(j.order) > maxReplayJobs {
			delete(j.jobs, j.order[0])
			delete(j.filters, j.order[0])
			j.order = j.order[1:]
		}
	}
	j.jobs[p.ID] = &p
}

// start remembers a replay that starts, with its filter.
func (j *replayJobs) start(p ops.ReplayProgress, f ops.ReplayFilter) {
	j.set(p)
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.filters == nil {
		j.filters = map[string]ops.ReplayFilter{}
	}
	if _, ok := j.jobs[p.ID]; ok {
		j.filters[p.ID] = f
	}
}

// recentReplay is one of GET /replay's answers: a replay's progress and its filter.
type recentReplay struct {
	ops.ReplayProgress
	Filter ops.ReplayFilter `json:"filter"`
}

// recent are the replays remembered, newest first.
func (j *replayJobs) recent() []recentReplay {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]recentReplay, 0, len(j.order))
	for i := len(j.order) - 1; i >= 0; i-- {
		id := j.order[i]
		out = append(out, recentReplay{*j.jobs[id], j.filters[id]})
	}
	return out
}

func (j *replayJobs) get(id string) (ops.ReplayProgress, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	p, ok := j.jobs[id]
	if !ok {
		return ops.ReplayProgress{}, false
	}
	return *p, true
}

// replayRequest is POST /replay's body: the command's filters, --since and --until
// as it takes them.
type replayRequest struct {
	Since         string   `json:"since"`
	Until         string   `json:"until"`
	AggregateType string   `json:"aggregate_type"`
	AggregateID   string   `json:"aggregate_id"`
	EventType     string   `json:"event_type"`
	IDs           []string `json:"ids"`
	DryRun        bool     `json:"dry_run"`
	Rate          float64  `json:"rate"`
}

// serveReplay starts a replay through the relay's own sink and answers 202 with its
// id; GET /replay/ID shows its progress, with waiting "paused" while the relay is.
// What the command refuses it refuses, with 409.
func (a *relayAPI) serveReplay(ctx context.Context) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		var body replayRequest
		if !decodeBody(w, req, 1<<20, &body, false, `want a JSON body of filters, e.g. {"since": "2h", "event_type": "order.created"}`) {
			return
		}
		r, cfg := a.r, a.r.Config()
		now := time.Now()
		f := ops.ReplayFilter{AggregateType: body.AggregateType, AggregateID: body.AggregateID, EventType: body.EventType, IDs: body.IDs}
		var err error
		if f.Since, err = ops.ParseReplayTime("since", body.Since, now); err != nil {
			writeJSON(w, http.StatusBadRequest, adminError{err.Error()})
			return
		}
		if f.Until, err = ops.ParseReplayTime("until", body.Until, now); err != nil {
			writeJSON(w, http.StatusBadRequest, adminError{err.Error()})
			return
		}
		if body.Rate < 0 {
			writeJSON(w, http.StatusBadRequest, adminError{"rate: want 0 (no limit) or a positive number of events per second"})
			return
		}
		if err := ops.CheckReplay(cfg, f, now); err != nil {
			writeJSON(w, http.StatusConflict, adminError{err.Error()})
			return
		}
		pool := r.Pool()
		if pool == nil {
			writeJSON(w, http.StatusServiceUnavailable, adminError{"the relay has not connected to the database yet; ask again shortly"})
			return
		}
		// The poller's share of the sink's buffers: the stream keeps its window. A
		// paused relay publishes nothing, replays included: the replay waits.
		opts := ops.ReplayOptions{Filter: f, ID: ops.NewReplayID(), DryRun: body.DryRun, Rate: body.Rate,
			MaxInFlight: max(cfg.PollBatchSize, 1), ProgressInterval: time.Second, OnProgress: a.replays.set, Pause: r.PauseGate()}
		started := ops.ReplayProgress{ID: opts.ID, StartedAt: now.UTC(), DryRun: opts.DryRun}
		if r.Paused() && !opts.DryRun {
			started.Waiting = ops.ReplayWaitingPaused
		}
		a.replays.start(started, f)
		if started.Waiting != "" {
			r.Logger().Info("replay started; it waits for the resume: a paused relay publishes nothing", "replay", opts.ID, "filter", f)
		} else {
			r.Logger().Info("replay started", "replay", opts.ID, "filter", f)
		}
		go func() {
			pr, err := ops.Replay(ctx, pool, r.Sink(), cfg, opts)
			if err != nil {
				r.Logger().Warn("replay ended with an error", "replay", pr.ID, "sent", pr.Sent, "total", pr.Total, "err", err)
				return
			}
			r.Logger().Info("replay done", "replay", pr.ID, "sent", pr.Sent, "total", pr.Total, "dry_run", pr.DryRun)
		}()
		answer := map[string]string{"id": opts.ID, "progress": "/replay/" + opts.ID}
		if started.Waiting != "" {
			answer["waiting"] = started.Waiting
		}
		writeJSON(w, http.StatusAccepted, answer)
	}
}

// serveReplayProgress answers a replay's progress.
func (a *relayAPI) serveReplayProgress(w http.ResponseWriter, req *http.Request) {
	id := strings.TrimSpace(req.PathValue("id"))
	p, ok := a.replays.get(id)
	if !ok {
		writeJSON(w, http.StatusNotFound, adminError{"no replay " + id + " here (the relay remembers its last 100, since it started)"})
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// serveReplays answers the replays started here, newest first, with their
// progress or outcome.
func (a *relayAPI) serveReplays(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string][]recentReplay{"replays": a.replays.recent()})
}
