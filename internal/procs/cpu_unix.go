//go:build unix

package procs

import (
	"syscall"
	"time"
)

// cpuUsed is the user and system CPU the process has used so far, or -1 when the
// kernel does not say.
func cpuUsed() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
