package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/walrelay/walrelay/bench/schedstat"
)

// wakeups counts what a process does per wake-up cycle, from /proc: its read and
// write system calls (syscr, syscw of /proc/<pid>/io, all threads) and its threads'
// context switches, voluntary and not. At moderate rates relay CPU goes with these
// rather than with the events (docs/performance.md, "Moderate rates").
type wakeups struct{ reads, writes, switches int64 }

func readWakeups(pid int) (wakeups, error) {
	var w wakeups
	io, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return w, err
	}
	for _, line := range strings.Split(string(io), "\n") {
		k, v, _ := strings.Cut(line, ":")
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch k {
		case "syscr":
			w.reads = n
		case "syscw":
			w.writes = n
		}
	}
	w.switches, err = schedstat.Switches(strconv.Itoa(pid))
	return w, err
}

// perEvent is what the counts grew by from w0, per event.
func (w wakeups) perEvent(w0 wakeups, events int) wakeupsPerEvent {
	n := float64(events)
	return wakeupsPerEvent{Reads: float64(w.reads-w0.reads) / n, Writes: float64(w.writes-w0.writes) / n,
		Switches: float64(w.switches-w0.switches) / n}
}

// wakeupsPerEvent is a step's wakeups per event.
type wakeupsPerEvent struct {
	Reads    float64 `json:"reads"`
	Writes   float64 `json:"writes"`
	Switches float64 `json:"context_switches"`
}
