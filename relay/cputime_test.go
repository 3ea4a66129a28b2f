package relay

import (
	"syscall"
	"testing"
	"time"
)

// CPUUsed is the user and system CPU this test process has used so far, for the
// benchmarks of both test packages: they report the relay's CPU per operation, which
// a shared machine disturbs less than the wall time (docs/performance.md). It fails
// tb when the kernel does not say.
func CPUUsed(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
