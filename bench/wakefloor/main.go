// Command wakefloor is the idle step's reference: a Go process that does nothing but
// wake once every -every for -for, then prints the CPU its threads ran meanwhile, in
// milliseconds per second. On a virtual machine a wake-up from idle can cost far more
// than the work it wakes for, so the relay's idle cost is read beside this floor,
// measured in the same seconds (docs/performance.md, "Idle").
package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/walrelay/walrelay/bench/schedstat"
)

func main() {
	every := flag.Duration("every", time.Second, "how often to wake")
	d := flag.Duration("for", 30*time.Second, "how long to run")
	flag.Parse()
	start, c0 := time.Now(), run()
	t := time.NewTicker(*every)
	for range t.C {
		if time.Since(start) >= *d {
			break
		}
	}
	elapsed := time.Since(start)
	fmt.Printf("%.3f\n", float64(run()-c0)/1e6/elapsed.Seconds())
}

// run is this process's run time so far (0 where schedstat is missing: the floor
// then reads 0, which the harness treats as not measured).
func run() time.Duration {
	d, _ := schedstat.Run("self")
	return d
}
