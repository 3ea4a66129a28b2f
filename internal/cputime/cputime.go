// Package cputime reads the CPU this process has used: benchmarks report the
// relay's CPU per operation with it, which a shared machine disturbs less than the
// wall time (docs/performance.md).
package cputime

import (
	"syscall"
	"testing"
	"time"
)

// Used is the user and system CPU this process has used so far; it fails tb when
// the kernel does not say.
func Used(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
