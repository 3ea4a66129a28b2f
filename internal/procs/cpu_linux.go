package procs

import (
	"syscall"
	"time"
	"unsafe"
)

// cpuUsed is the user and system CPU the process has used so far, or -1 when the
// kernel does not say. The call is made directly, not through syscall.Getrusage,
// which would wake the runtime's monitor thread on an idle process once a sample
// (internal/quietconn says why that costs more than the call).
func cpuUsed() time.Duration {
	var ru syscall.Rusage
	if _, _, errno := syscall.RawSyscall(syscall.SYS_GETRUSAGE, syscall.RUSAGE_SELF, uintptr(unsafe.Pointer(&ru)), 0); errno != 0 {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
