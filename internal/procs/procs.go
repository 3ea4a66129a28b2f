// Package procs lets the walrelay process run its goroutines on one processor
// (GOMAXPROCS 1) while it needs no more, and gives it the runtime's default again
// when its load calls for it.
//
// Why: a relay that keeps up with its stream spends its CPU on waking up, not on the
// events (docs/performance.md, "Moderate rates: the runtime's monitor thread and one
// processor"). With more than one processor the
// Go runtime wakes a second thread to look for work each time a goroutine becomes
// runnable, and that thread parks again a moment later: two thread switches a
// wake-up, each far dearer on a small virtual machine than the goroutine switch it
// replaces. On one processor a hand-over between goroutines stays on the thread that
// made it. A relay that keeps up with a moderate stream uses a small part of a core;
// what needs more (a backlog drain, compression, several busy databases, TLS) raises
// the count within a sample.
package procs

import (
	"context"
	"log/slog"
	"runtime"
	"time"
)

// Policy says when the count goes up and down, in shares of one core's time.
type Policy struct {
	// Every is how often the process's CPU is read.
	Every time.Duration
	// Up: from one processor to the default when a sample used this share of a core.
	Up float64
	// Down: back to one processor once Calm samples in a row each used less than this.
	Down float64
	Calm int
}

// DefaultPolicy samples once a second, rises at 60% of a core and falls back after
// ten seconds under 30%: the gap keeps a load near one threshold from switching the
// count every second.
var DefaultPolicy = Policy{Every: time.Second, Up: 0.6, Down: 0.3, Calm: 10}

// Adapt runs the policy until ctx ends, starting on one processor, and leaves the
// runtime's default in place when it returns. It does nothing when the default is
// one processor already. Call it only from a program that owns its process's
// scheduling (the walrelay binary, not a library): GOMAXPROCS is process-wide.
func Adapt(ctx context.Context, p Policy, logger *slog.Logger) {
	defer runtime.SetDefaultGOMAXPROCS()
	if runtime.GOMAXPROCS(0) <= 1 || cpuUsed() < 0 {
		return
	}
	a := adapter{policy: p}
	runtime.GOMAXPROCS(1)
	tick := time.NewTimer(untilAligned(time.Now(), p.Every))
	defer tick.Stop()
	last, at := cpuUsed(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		used := cpuUsed()
		share := float64(used-last) / float64(now.Sub(at))
		last, at = used, now
		tick.Reset(untilAligned(now, p.Every))
		switch a.observe(share) {
		case widen:
			runtime.SetDefaultGOMAXPROCS()
			logger.Debug("more processors: the load needs them", "gomaxprocs", runtime.GOMAXPROCS(0), "cpu_share", round2(share))
		case narrow:
			runtime.GOMAXPROCS(1)
			logger.Debug("one processor: the load fits on it", "cpu_share", round2(share))
		}
	}
}

type change int

const (
	stay change = iota
	widen
	narrow
)

// adapter is the policy's state: whether the count is raised and for how many
// samples in a row the load stayed under Down.
type adapter struct {
	policy Policy
	raised bool
	calm   int
}

// observe takes one sample's share of a core and says what to change.
func (a *adapter) observe(share float64) change {
	if !a.raised {
		if share >= a.policy.Up {
			a.raised, a.calm = true, 0
			return widen
		}
		return stay
	}
	if share >= a.policy.Down {
		a.calm = 0
		return stay
	}
	if a.calm++; a.calm < a.policy.Calm {
		return stay
	}
	a.raised = false
	return narrow
}

// untilAligned is the time to the next multiple of every since the Unix epoch: the
// instants the relay's own once-a-second work wakes at, so that sampling adds no
// wake-up of its own to an idle process.
func untilAligned(now time.Time, every time.Duration) time.Duration {
	next := (now.UnixNano()/int64(every) + 1) * int64(every)
	return time.Duration(next - now.UnixNano())
}

func round2(f float64) float64 { return float64(int(f*100+0.5)) / 100 }
