package schedstat

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Switches is how often the threads of pid ("self" or a number) have been switched
// out, voluntarily or not (the ctxt_switches lines of /proc/PID/task/*/status). At
// moderate rates a process's CPU goes with these wake-ups rather than with its work.
// A thread that exited drops out of the sum.
func Switches(pid string) (int64, error) {
	paths, err := filepath.Glob("/proc/" + pid + "/task/*/status")
	if err != nil {
		return 0, err
	}
	var total int64
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			continue // the thread ended
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				total += n
			}
		}
		f.Close()
	}
	return total, nil
}
