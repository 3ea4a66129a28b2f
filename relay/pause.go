package relay

import (
	"context"
	"time"
)

// Pause stops the relay at the stream's next message boundary: it reads and
// publishes nothing, the poller and replays included, and keeps the replication
// connection and the slot with standby status updates. Events already handed to the
// broker still settle and are confirmed. It reports whether the relay was running.
func (r *Relay) Pause() bool { return r.PauseBecause("") }

// pauseNote is when and why the relay was last paused: what PauseState says, so
// that `walrelay replay` can say it when it refuses.
type pauseNote struct {
	since time.Time
	why   string // empty: not known
}

// PauseBecause is Pause, remembering why: GET /pause and PauseState say it.
func (r *Relay) PauseBecause(why string) bool {
	if !r.pause.Pause() {
		return false
	}
	r.pauseNote.Store(&pauseNote{since: time.Now(), why: why})
	r.metrics.paused.Set(1)
	events, _ := r.window.InFlight()
	r.log.Info("paused: reading and publishing nothing until resumed; the slot keeps WAL meanwhile",
		"slot", r.cfg.Slot, "events_in_flight", events, "reason", why)
	return true
}

// Resume lets a paused relay read on from the message after the last it read, and
// reports whether it was paused.
func (r *Relay) Resume() bool {
	if !r.pause.Resume() {
		return false
	}
	r.metrics.paused.Set(0)
	r.log.Info("resumed", "slot", r.cfg.Slot)
	return true
}

// waitResumed returns at once when the relay runs, and otherwise logs why it waits
// and returns once resumed, or with ctx's error.
func (r *Relay) waitResumed(ctx context.Context, why string) error {
	if !r.pause.Paused() {
		return nil
	}
	r.log.Info("paused: "+why, "slot", r.cfg.Slot)
	for !r.pause.Wait(ctx, time.Now().Add(time.Minute)) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// Paused reports whether the relay is paused.
func (r *Relay) Paused() bool { return r.pause.Paused() }

// PauseState is whether the relay is paused, and since when and why when it is:
// what GET /pause answers (package admin).
type PauseState struct {
	Paused bool
	Since  time.Time // zero: not paused, or not known
	Reason string    // empty: not known
}

// PauseState is the relay's pause state now.
func (r *Relay) PauseState() PauseState {
	if !r.pause.Paused() {
		return PauseState{}
	}
	st := PauseState{Paused: true}
	if n := r.pauseNote.Load(); n != nil {
		st.Since, st.Reason = n.since.UTC(), n.why
	}
	return st
}
