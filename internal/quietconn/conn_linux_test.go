package quietconn_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime/trace"
	"sync"
	"testing"
	"time"

	xtrace "golang.org/x/exp/trace"

	"github.com/walrelay/walrelay/internal/quietconn"
)

// pair returns a quiet client connection and the plain server end of it.
func pair(t *testing.T) (*quietconn.Conn, net.Conn) {
	t.Helper()
	c, server := loopback(t, quietconn.Dial((&net.Dialer{}).DialContext))
	q, ok := c.(*quietconn.Conn)
	if !ok {
		t.Fatalf("Dial over TCP gave a %T, want *quietconn.Conn", c)
	}
	return q, server
}

// loopback connects a client made by dial to a plain server end on loopback.
func loopback(t *testing.T, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		s, _ := ln.Accept()
		accepted <- s
	}()
	client, err = dial(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if server = <-accepted; server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestEchoesEveryByte(t *testing.T) {
	c, server := pair(t)
	go io.Copy(server, server)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		msg := make([]byte, 1+rng.IntN(64<<10))
		for j := range msg {
			msg[j] = byte(rng.Uint32())
		}
		if n, err := c.Write(msg); err != nil || n != len(msg) {
			t.Fatalf("message %d: wrote %d of %d: %v", i, n, len(msg), err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatalf("message %d: read back: %v", i, err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("message %d: %d bytes came back different", i, len(msg))
		}
	}
}

// A write larger than the socket buffers waits for room while the peer is not
// reading, then completes once it is: every byte arrives, in order.
func TestLargeWriteWaitsForRoom(t *testing.T) {
	c, server := pair(t)
	msg := make([]byte, 32<<20)
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	wrote := make(chan error, 1)
	go func() {
		n, err := c.Write(msg)
		if err == nil && n != len(msg) {
			err = errors.New("short write")
		}
		wrote <- err
	}()
	select {
	case err := <-wrote:
		t.Fatalf("a 32 MiB write returned before the peer read anything: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(server, got); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("the bytes read differ from the bytes written")
	}
}

func TestReadDeadline(t *testing.T) {
	c, server := pair(t)
	if err := c.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(make([]byte, 10))
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past its deadline: %v, want a timeout (os.ErrDeadlineExceeded)", err)
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := server.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "after" {
		t.Fatalf("read after the deadline was lifted: %q, %v", buf, err)
	}
}

func TestEOFWhenThePeerCloses(t *testing.T) {
	c, server := pair(t)
	if _, err := server.Write([]byte("last")); err != nil {
		t.Fatal(err)
	}
	server.Close()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "last" {
		t.Fatalf("ReadAll: %q, %v; want \"last\" and io.EOF seen as the end", got, err)
	}
}

func TestCloseEndsAWaitingRead(t *testing.T) {
	c, _ := pair(t)
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 10))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // let the read reach the poller; it ends either way
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read on a closed connection: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the waiting read")
	}
}

// Reads and writes from several goroutines at once, as net.Conn allows: the race
// detector checks the shared per-direction state.
func TestConcurrentCalls(t *testing.T) {
	c, server := pair(t)
	go io.Copy(server, server)
	const writers, each, size = 4, 200, 100
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			msg := bytes.Repeat([]byte{'x'}, size)
			for range each {
				if _, err := c.Write(msg); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var mu sync.Mutex
	total := 0
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			buf := make([]byte, 512)
			for {
				n, err := c.Read(buf)
				mu.Lock()
				total += n
				done := total == writers*each*size
				mu.Unlock()
				if done || err != nil {
					c.SetReadDeadline(time.Now()) // wake the other reader
					return
				}
			}
		})
	}
	wg.Wait()
	readers.Wait()
	if total != writers*each*size {
		t.Fatalf("read %d bytes, want %d", total, writers*each*size)
	}
}

func TestWrapLeavesOtherConnectionsAlone(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := quietconn.Wrap(a); got != a {
		t.Fatalf("Wrap of a %T gave a %T", a, got)
	}
	if _, ok := quietconn.TCP(a); ok {
		t.Fatal("TCP found a TCP connection under a pipe")
	}
	c, _ := pair(t)
	if tc, ok := quietconn.TCP(c); !ok || tc == nil {
		t.Fatal("TCP found no TCP connection under a quiet one")
	}
}

// The point of the package: a goroutine that reads and writes through a quiet
// connection makes no system call the runtime is told of, where the same round trips
// over the plain connection make one or more each. The runtime's execution trace
// records each such call as the goroutine entering the syscall state.
func TestRoundTripsMakeNoSyscallTheRuntimeSees(t *testing.T) {
	c, server := pair(t)
	go io.Copy(server, server)
	plain, plainServer := loopback(t, (&net.Dialer{}).DialContext)
	go io.Copy(plainServer, plainServer)

	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Fatal(err)
	}
	const trips = 200
	roundTrips := func(conn net.Conn) {
		msg, got := []byte("ping"), make([]byte, 4)
		for range trips {
			if _, err := conn.Write(msg); err != nil {
				t.Error(err)
				return
			}
			if _, err := io.ReadFull(conn, got); err != nil {
				t.Error(err)
				return
			}
		}
	}
	ctx := context.Background()
	trace.WithRegion(ctx, "quiet", func() { roundTrips(c) })
	trace.WithRegion(ctx, "plain", func() { roundTrips(plain) })
	trace.Stop()

	counts := syscallsInRegions(t, &buf)
	if counts["plain"] < trips {
		t.Fatalf("the plain connection's %d round trips show %d system calls in the trace: the count cannot see them", trips, counts["plain"])
	}
	if counts["quiet"] != 0 {
		t.Fatalf("the quiet connection's %d round trips made %d system calls the runtime saw, want 0", trips, counts["quiet"])
	}
}

// syscallsInRegions counts, per region name, the goroutines' entries into the
// syscall state while inside that region.
func syscallsInRegions(t *testing.T, r io.Reader) map[string]int {
	t.Helper()
	rd, err := xtrace.NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	in := map[xtrace.GoID]string{}
	counts := map[string]int{}
	for {
		ev, err := rd.ReadEvent()
		if err == io.EOF {
			return counts
		}
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Kind() {
		case xtrace.EventRegionBegin:
			in[ev.Goroutine()] = ev.Region().Type
		case xtrace.EventRegionEnd:
			delete(in, ev.Goroutine())
		case xtrace.EventStateTransition:
			st := ev.StateTransition()
			if st.Resource.Kind != xtrace.ResourceGoroutine {
				continue
			}
			if _, to := st.Goroutine(); to == xtrace.GoSyscall {
				if region, ok := in[st.Resource.Goroutine()]; ok {
					counts[region]++
				}
			}
		}
	}
}
