package main

import (
	"bytes"
	"context"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// cycleFloor is what the wake-up cycle alone costs per event at one rate on this
// machine: cyclefloor's CPU per event when one timer wakes it every floorWait (the
// fewest wake-ups a relay handing over within that wait can have), and when read
// batching's low-water mark and read deadline wake it, as they wake the relay
// (docs/performance.md, "Moderate rates: the machine's floor"). 0: not measured.
type cycleFloor struct {
	TimerMicros    float64 `json:"timer_us_per_event"`
	DeadlineMicros float64 `json:"deadline_us_per_event"`
}

const (
	// floorWait is read batching's batchWait (replication/batching.go): how long
	// the relay may hold back the stream's bytes, so the floor wakes as often.
	floorWait = "2ms"
	// floorSeconds is how long each way of waking is measured, after a second of
	// warm-up.
	floorSeconds = 5 * time.Second
)

// measureCycleFloor runs cyclefloor at rate, each way of waking in turn, with
// eventBytes of stream per transaction. It runs after the rate's step, with the load
// stopped, so the floor is measured on the quieter machine: a lower bound.
func (e *env) measureCycleFloor(ctx context.Context, rate, eventBytes int) *cycleFloor {
	run := func(wake string) float64 {
		cmd := exec.CommandContext(ctx, e.cycleFloor, "-wake", wake, "-wait", floorWait,
			"-rate", strconv.Itoa(rate), "-event-bytes", strconv.Itoa(eventBytes), "-for", floorSeconds.String())
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			progress("  cyclefloor -wake %s: %v: %s", wake, err, strings.TrimSpace(errOut.String()))
			return 0
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(out.String()), 64)
		if err != nil {
			progress("  cyclefloor printed %q: %v", out.String(), err)
			return 0
		}
		progress("  %s", strings.TrimSpace(errOut.String()))
		return v
	}
	return &cycleFloor{TimerMicros: run("timer"), DeadlineMicros: run("deadline")}
}
