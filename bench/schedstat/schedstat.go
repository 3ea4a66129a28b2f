// Package schedstat reads how long a process's threads have run, from
// /proc/PID/task/*/schedstat, in nanoseconds, and how often they were switched out:
// the harness's measures of CPU and wake-ups, shared with the processes it runs
// beside the relay.
package schedstat

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Run is the run time of the threads of pid ("self" or a number). A thread that
// exited drops out of the sum.
func Run(pid string) (time.Duration, error) {
	paths, err := filepath.Glob("/proc/" + pid + "/task/*/schedstat")
	if err != nil || len(paths) == 0 {
		return 0, fmt.Errorf("/proc/%s/task: no schedstat", pid)
	}
	var ns int64
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // the thread ended
		}
		run, _, _ := strings.Cut(string(data), " ")
		n, err := strconv.ParseInt(run, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		ns += n
	}
	return time.Duration(ns), nil
}
