package replication

import (
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The claim batching rests on: with the mode on, the kernel reports the socket
// readable (which is what wakes the reading goroutine) only once batchBytes are
// there; off, one byte is enough.
func TestBatchingHoldsReadinessUntilABatchIsThere(t *testing.T) {
	client, server := tcpPair(t)
	b := newReadBatching(client)
	if b.raw == nil {
		t.Fatal("no raw connection for a TCP connection")
	}
	b.set(true)
	if !b.on {
		t.Fatal("SO_RCVLOWAT could not be set")
	}
	write(t, server, 100)
	waitQueued(t, b.raw, 100)
	if readable(t, b.raw) {
		t.Fatalf("readable with 100 bytes queued and batching on; want readable at %d", batchBytes)
	}
	write(t, server, batchBytes-100)
	waitQueued(t, b.raw, batchBytes)
	if !readable(t, b.raw) {
		t.Fatalf("not readable with %d bytes queued", batchBytes)
	}
	buf := make([]byte, 2*batchBytes)
	for got := 0; got < batchBytes; {
		n, err := client.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}

	b.set(false)
	write(t, server, 1)
	waitQueued(t, b.raw, 1)
	if !readable(t, b.raw) {
		t.Fatal("not readable with 1 byte queued and batching off")
	}
}

func write(t *testing.T, c net.Conn, n int) {
	t.Helper()
	if _, err := c.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
}

// waitQueued waits until the kernel has n bytes for the socket (loopback delivery
// is quick, but not synchronous with the sender's write).
func waitQueued(t *testing.T, raw syscall.RawConn, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var queued int
		var qerr error
		if err := raw.Control(func(fd uintptr) { queued, qerr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil || qerr != nil {
			t.Fatalf("SIOCINQ: %v %v", err, qerr)
		}
		if queued >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes queued after 10s, want %d", queued, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// readable asks poll(2), without waiting, whether the socket is readable.
func readable(t *testing.T, raw syscall.RawConn) bool {
	t.Helper()
	var n int
	var perr error
	if err := raw.Control(func(fd uintptr) {
		n, perr = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
	}); err != nil || perr != nil {
		t.Fatalf("poll: %v %v", err, perr)
	}
	return n > 0
}
