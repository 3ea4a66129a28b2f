//go:build !linux

package procs

import "time"

// cpuUsed cannot be read here: Adapt leaves the runtime's default alone.
func cpuUsed() time.Duration { return -1 }
