package replication

import (
	"net"
	"testing"
	"time"
)

// tcpPair is a connected loopback TCP pair.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestBatchingFollowsTheArrivalRate(t *testing.T) {
	client, _ := tcpPair(t)
	b := newReadBatching(client)
	start := time.Now()
	b.windowStart = start

	// fast bytes, but not yet a whole rate window: no decision
	b.received(1 << 20)
	b.observe(start.Add(rateWindow / 2))
	if b.on {
		t.Fatal("batching turned on before a whole rate window")
	}
	// 1 MiB in 10ms (100 MB/s): on
	b.observe(start.Add(rateWindow))
	if !b.on {
		t.Fatal("batching off at 100 MB/s")
	}
	if d := b.deadline(start, start.Add(time.Second)); d != start.Add(batchWait) {
		t.Fatalf("batching deadline %v after the clock, want %v", d.Sub(start), batchWait)
	}
	// half of onRate: stays on (hysteresis)
	now := start.Add(rateWindow)
	b.received(onRate / 2 * int(rateWindow) / int(time.Second))
	now = now.Add(rateWindow)
	b.observe(now)
	if !b.on {
		t.Fatal("batching turned off at half its threshold rate")
	}
	// nothing for a window (the stream went idle): off
	now = now.Add(rateWindow)
	b.observe(now)
	if b.on {
		t.Fatal("batching still on with no bytes arriving")
	}
	if d := b.deadline(now, now.Add(time.Second)); d != now.Add(time.Second) {
		t.Fatal("unbatched deadline is not the status timer")
	}
	// a moderate stream: 1,000 transactions of 470 bytes a second (470 kB/s) turns
	// it on, 100 (47 kB/s) does not, from off
	for _, c := range []struct {
		perSecond int
		on        bool
	}{{100 * 470, false}, {1000 * 470, true}, {5000 * 470, true}} {
		b.set(false)
		b.windowStart = now
		b.received(c.perSecond * int(rateWindow) / int(time.Second))
		now = now.Add(rateWindow)
		b.observe(now)
		if b.on != c.on {
			t.Errorf("%d bytes/s: batching on %v, want %v", c.perSecond, b.on, c.on)
		}
	}
}

func TestBatchingStaysOffOffTCP(t *testing.T) {
	a, _ := net.Pipe()
	b := newReadBatching(a)
	b.windowStart = time.Now()
	b.received(1 << 30)
	b.observe(b.windowStart.Add(rateWindow))
	if b.on {
		t.Fatal("batching on for a connection that is not TCP")
	}
}
