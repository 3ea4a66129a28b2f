package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// idleResult is the relay streaming with no writes: what it costs to stand by.
type idleResult struct {
	Seconds        float64 `json:"seconds"`
	RelayCPUms     float64 `json:"relay_cpu_ms"`
	RelayCPUmsPerS float64 `json:"relay_cpu_ms_per_second"`
	// FloorCPUmsPerS is wakefloor's CPU in the same seconds: a Go process that only
	// wakes once a second, what any wake-up costs on this machine (0: not measured).
	FloorCPUmsPerS   float64 `json:"floor_cpu_ms_per_second,omitempty"`
	WalsenderCPUms   float64 `json:"walsender_cpu_ms"`
	PostgresCPUms    float64 `json:"postgres_cpu_ms"` // the whole server's, the relay's statements included
	RSSKiB           int64   `json:"rss_kib"`
	ConfirmedMoved   bool    `json:"confirmed_moved"` // the slot's confirmed LSN advanced with the server's WAL
	Ready            bool    `json:"ready"`           // /readyz answered 200 at the end
	MachineBusy      float64 `json:"machine_busy_fraction"`
	ProfileWrittenTo string  `json:"profile,omitempty"`
	// Console is the steps without and with a console open that follow (nil: not run).
	Console *consoleIdleResult `json:"console,omitempty"`
}

// measureIdle lets the relay stand by for d with no writes and reads its CPU (utime +
// stime), the walsender's and the server's, and its resident memory at the end. It
// also checks that standing by kept the health signals true: /readyz still answers
// 200 and the slot's lag did not grow past the WAL the server wrote meanwhile.
func (e *env) measureIdle(ctx context.Context, rp *relayProc, mon *pgx.Conn, slot string, d time.Duration) (idleResult, error) {
	res := idleResult{Seconds: d.Seconds()}
	lag0, err := slotLag(ctx, mon, slot)
	if err != nil {
		return res, err
	}
	wsPID := walsenderPID(ctx, mon, slot)
	cpu0, _ := cpuSeconds(rp.pid())
	ws0, _ := cpuSeconds(wsPID)
	pg0 := e.postgresCPU()
	machine := readMachineCPU()

	path := ""
	if e.opts.relayProfile != "" {
		path = filepath.Join(e.opts.relayProfile, "relay-idle.pprof")
	}
	floor := e.startFloor(ctx, d)
	written, err := standIdle(ctx, rp, path, d)
	if err != nil {
		return res, err
	}
	res.FloorCPUmsPerS = floor()
	if written {
		res.ProfileWrittenTo = path
	}
	cpu1, _ := cpuSeconds(rp.pid())
	ws1, _ := cpuSeconds(wsPID)
	res.RelayCPUms = (cpu1 - cpu0) * 1e3
	res.RelayCPUmsPerS = res.RelayCPUms / d.Seconds()
	if wsPID != 0 {
		res.WalsenderCPUms = (ws1 - ws0) * 1e3
	}
	res.PostgresCPUms = (e.postgresCPU() - pg0) * 1e3
	res.MachineBusy = machine.busySince()
	res.RSSKiB, _ = statusKB(rp.pid(), "VmRSS")
	lag1, err := slotLag(ctx, mon, slot)
	if err != nil {
		return res, err
	}
	res.ConfirmedMoved = lag1 <= max(lag0, 64<<10)
	res.Ready = rp.waitReady(ctx, time.Second) == nil
	progress("  idle %s: relay CPU %.0f ms (%.2f ms/s; a process that only wakes once a second %.2f ms/s), walsender %.0f ms, PostgreSQL %.0f ms, RSS %s, slot lag %s -> %s, ready %v",
		d, res.RelayCPUms, res.RelayCPUmsPerS, res.FloorCPUmsPerS, res.WalsenderCPUms, res.PostgresCPUms,
		bytesIEC(res.RSSKiB<<10), bytesIEC(lag0), bytesIEC(lag1), res.Ready)
	if !res.Ready {
		return res, fmt.Errorf("idle: the relay was not ready after %s with no writes; relay log: %s", d, rp.logPath)
	}
	return res, nil
}

// standIdle lets d pass with no writes, while it writes a CPU profile of the relay
// to path when path is set; it reports whether the profile was written.
func standIdle(ctx context.Context, rp *relayProc, path string, d time.Duration) (bool, error) {
	profiled := make(chan bool, 1)
	if path != "" {
		go func() {
			err := rp.profile(ctx, path, d)
			if err != nil {
				progress("  relay profile: %v", err)
			}
			profiled <- err == nil
		}()
	} else {
		profiled <- false
	}
	if err := pause(ctx, d); err != nil {
		return false, err
	}
	return <-profiled, nil
}

// startFloor runs wakefloor for d beside the idle relay; the function it returns
// waits for it and gives its CPU in ms a second (0 if it failed: the floor is a
// reference, not a result).
func (e *env) startFloor(ctx context.Context, d time.Duration) func() float64 {
	cmd := exec.CommandContext(ctx, e.floor, "-for", d.String())
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		progress("  wakefloor: %v", err)
		return func() float64 { return 0 }
	}
	return func() float64 {
		if err := cmd.Wait(); err != nil {
			progress("  wakefloor: %v", err)
			return 0
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(out.String()), 64)
		if err != nil {
			progress("  wakefloor printed %q: %v", out.String(), err)
			return 0
		}
		return v
	}
}
