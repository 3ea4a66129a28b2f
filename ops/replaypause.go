package ops

import (
	"context"
	"time"
)

// ReplayWaitingPaused is ReplayProgress.Waiting while the relay is paused: a paused
// relay publishes nothing, replays included.
const ReplayWaitingPaused = "paused"

// holdWhilePaused returns at once unless the replay's pause holds. Otherwise it says
// so in the progress, waits for the resume (or ctx's end), and leaves the wait out
// of the rate's pacing, so that the replay does not catch up in a burst.
func (p *replayRun) holdWhilePaused(ctx context.Context) error {
	if p.opts.Pause == nil || !p.opts.Pause.Paused() {
		return nil
	}
	began := time.Now()
	p.setWaiting(ReplayWaitingPaused)
	p.report(true)
	for !p.opts.Pause.Wait(ctx, time.Now().Add(time.Minute)) {
		if ctx.Err() != nil {
			p.setWaiting("")
			return ctx.Err()
		}
	}
	if !p.paceFrom.IsZero() {
		p.paceFrom = p.paceFrom.Add(time.Since(began))
	}
	p.setWaiting("")
	p.report(true)
	return nil
}

// setWaiting sets what the replay waits for, which the progress ticker reads.
func (p *replayRun) setWaiting(w string) {
	p.reportMu.Lock()
	p.progress.Waiting = w
	p.reportMu.Unlock()
}
