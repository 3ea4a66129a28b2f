// Command wakefloor is the idle step's reference: a Go process that does nothing but
// wake once every -every for -for, then prints the CPU its threads ran meanwhile, in
// milliseconds per second. On a virtual machine a wake-up from idle can cost far more
// than the work it wakes for, so the relay's idle cost is read beside this floor,
// measured in the same seconds (docs/performance.md, "Idle").
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	every := flag.Duration("every", time.Second, "how often to wake")
	d := flag.Duration("for", 30*time.Second, "how long to run")
	flag.Parse()
	start, c0 := time.Now(), runNanos()
	t := time.NewTicker(*every)
	for range t.C {
		if time.Since(start) >= *d {
			break
		}
	}
	elapsed := time.Since(start)
	fmt.Printf("%.3f\n", float64(runNanos()-c0)/1e6/elapsed.Seconds())
}

// runNanos is the run time of this process's threads (schedstat), in nanoseconds.
func runNanos() int64 {
	paths, _ := filepath.Glob("/proc/self/task/*/schedstat")
	var ns int64
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		run, _, _ := strings.Cut(string(b), " ")
		n, _ := strconv.ParseInt(run, 10, 64)
		ns += n
	}
	return ns
}
