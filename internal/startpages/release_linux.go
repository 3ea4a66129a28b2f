package startpages

import (
	"fmt"
	"os"
	"syscall"
)

// Release drops the executable's read-only pages from the process's resident set
// and returns how many bytes of mappings it advised. Pages the process still uses
// come back on their next access, from the page cache. Call it once start-up is
// over; an error leaves the process as it was, so a caller may only log it.
func Release() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("startpages: the executable's path: %w", err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("startpages: %w", err)
	}
	spans, err := releasable(f, exe)
	f.Close()
	if err != nil {
		return 0, fmt.Errorf("startpages: reading /proc/self/smaps: %w", err)
	}
	var n int64
	for _, s := range spans {
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, s.start, s.end-s.start, syscall.MADV_DONTNEED); errno != 0 {
			return n, fmt.Errorf("startpages: madvise %#x-%#x: %w", s.start, s.end, errno)
		}
		n += int64(s.end - s.start)
	}
	return n, nil
}
