// Command kfakeserver runs franz-go's kfake, a Kafka-protocol broker, in a process
// of its own, so that the benchmark harness can measure the relay's CPU and memory
// apart from the broker's. It prints "listening HOST:PORT" once it accepts
// connections and runs until SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func main() {
	port := flag.Int("port", 0, "TCP port on 127.0.0.1 (0: a free one)")
	partitions := flag.Int("partitions", 4, "partitions of auto-created topics")
	produceDelay := flag.Duration("produce-delay", 0, "hold each produce request this long before handling it, one at a time: a broker that lags")
	flag.Parse()

	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(*partitions)}
	if *port != 0 {
		opts = append(opts, kfake.Ports(*port))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfakeserver: start kfake:", err)
		os.Exit(1)
	}
	if *produceDelay > 0 {
		c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			time.Sleep(*produceDelay)
			return nil, nil, false
		})
	}
	fmt.Println("listening", c.ListenAddrs()[0])

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	// Which signal, in the log: the harness sends SIGTERM only when it exits.
	fmt.Fprintf(os.Stderr, "kfakeserver: %v, stopping\n", <-sig)
	c.Close()
}
