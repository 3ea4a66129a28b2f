//go:build linux

// Command cyclefloor is the moderate-rate step's reference: the least CPU a relay can
// spend per event at a given rate on this machine while handing events over within
// a wait. It is a relay with nothing but the wake-ups and the socket traffic: a peer
// process plays the walsender (one write per transaction of -event-bytes, -rate a
// second) and the broker (a short answer to each request). Each wake-up the floor
// reads what the stream brought, sends one request of half those bytes and takes the
// answers that arrived without waiting for them, so that answers wake nothing. What
// wakes it is -wake: a timer every -wait and nothing else (the fewest wake-ups), or
// read batching's low-water mark and read deadline, as they wake the relay. No
// decoding, no records, no confirmation: what it spends per event is what the cycle
// alone costs (docs/performance.md, "Moderate rates: the machine's floor").
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/walrelay/walrelay/bench/schedstat"
	"golang.org/x/sys/unix"
)

func main() {
	rate := flag.Int("rate", 5000, "transactions a second the peer writes")
	eventBytes := flag.Int("event-bytes", 650, "stream bytes per transaction (Begin, Insert, Commit)")
	wait := flag.Duration("wait", 2*time.Millisecond, "how long a wake-up may hold back the stream's bytes")
	how := flag.String("wake", "timer", "what wakes the floor: timer (a timerfd every -wait, the least wake-ups) or deadline (read batching's low-water mark and read deadline)")
	d := flag.Duration("for", 10*time.Second, "how long to measure")
	peer := flag.String("peer", "", "internal: run as the peer, dialling this stream,broker address pair")
	flag.Parse()
	if *peer != "" {
		if err := runPeer(*peer, *rate, *eventBytes, *d); err != nil {
			fmt.Fprintln(os.Stderr, "cyclefloor peer:", err)
			os.Exit(1)
		}
		return
	}
	f, err := runFloor(*how, *rate, *eventBytes, *wait, *d)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cyclefloor:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "cyclefloor: %d/s, woken by a %s every %v: %d events in %.1fs, %.2f µs per event, %.3f switches per event, %.1f ms of CPU a second\n",
		*rate, *how, *wait, f.events, f.elapsed.Seconds(), f.micros(), f.switchesPerEvent(), float64(f.cpu)/1e6/f.elapsed.Seconds())
	fmt.Printf("%.3f\n", f.micros())
}

// floor is one measurement: the events the stream brought, the process's CPU and
// thread switches meanwhile.
type floor struct {
	events   int
	elapsed  time.Duration
	cpu      time.Duration
	switches int64
}

func (f floor) micros() float64 {
	return float64(f.cpu.Nanoseconds()) / 1e3 / float64(max(f.events, 1))
}

func (f floor) switchesPerEvent() float64 { return float64(f.switches) / float64(max(f.events, 1)) }

// runFloor starts the peer, then measures its own run time and thread switches over
// d, after a second of warm-up.
func runFloor(how string, rate, eventBytes int, wait, d time.Duration) (floor, error) {
	runtime.GOMAXPROCS(1) // as walrelay run does while its load fits on one processor
	streamL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return floor{}, err
	}
	brokerL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return floor{}, err
	}
	self, err := os.Executable()
	if err != nil {
		return floor{}, err
	}
	p := exec.Command(self, "-peer", streamL.Addr().String()+","+brokerL.Addr().String(),
		"-rate", strconv.Itoa(rate), "-event-bytes", strconv.Itoa(eventBytes), "-for", (d + 2*time.Second).String())
	p.Stderr = os.Stderr
	if err := p.Start(); err != nil {
		return floor{}, err
	}
	defer p.Wait()
	defer p.Process.Kill()
	stream, err := accept(streamL)
	if err != nil {
		return floor{}, err
	}
	broker, err := accept(brokerL)
	if err != nil {
		return floor{}, err
	}
	sraw, _ := stream.SyscallConn()
	braw, _ := broker.SyscallConn()
	// The answers never wake the floor: it takes them at its next wake-up.
	if err := setLowat(braw, 1<<20); err != nil {
		return floor{}, err
	}

	buf := make([]byte, 1<<20)
	req := make([]byte, 4+len(buf)/2)
	answers := make([]byte, 64<<10)
	var wake func() (int, error)
	switch how {
	case "timer":
		// Nothing but the timer wakes: the stream's bytes and the answers are taken
		// when it fires, one thread switch per wait.
		if err := setLowat(sraw, 1<<20); err != nil {
			return floor{}, err
		}
		t, err := newTicker(wait)
		if err != nil {
			return floor{}, err
		}
		defer t.Close()
		traw, err := t.SyscallConn()
		if err != nil {
			return floor{}, err
		}
		tick := make([]byte, 8)
		wake = func() (int, error) {
			if _, err := readBatch(traw, tick); err != nil {
				return 0, err
			}
			return readNow(sraw, buf)
		}
	case "deadline":
		// As read batching does: the bytes wake at 16 KiB, a read deadline at wait.
		if err := setLowat(sraw, 16<<10); err != nil {
			return floor{}, err
		}
		wake = func() (int, error) {
			stream.SetReadDeadline(time.Now().Add(wait))
			return readBatch(sraw, buf)
		}
	default:
		return floor{}, fmt.Errorf("-wake %q: want timer or deadline", how)
	}

	var events, pending int // pending: stream bytes of a transaction not yet whole
	warm := time.Now().Add(time.Second)
	var c0 time.Duration
	var w0 int64
	var start time.Time
	for {
		now := time.Now()
		if start.IsZero() && now.After(warm) {
			start, c0, w0, events = now, cpu(), selfSwitches(), 0
		}
		if !start.IsZero() && now.Sub(start) >= d {
			break
		}
		n, err := wake()
		if err != nil {
			return floor{}, err
		}
		pending += n
		events += pending / eventBytes
		pending %= eventBytes
		if n > 0 {
			binary.BigEndian.PutUint32(req, uint32(n/2))
			if err := writeAll(braw, req[:4+n/2]); err != nil {
				return floor{}, err
			}
		}
		if err := drain(braw, answers); err != nil {
			return floor{}, err
		}
	}
	return floor{events: events, elapsed: time.Since(start), cpu: cpu() - c0, switches: selfSwitches() - w0}, nil
}

// newTicker is a timerfd that fires every d, read through the runtime's poller: one
// wake-up per tick, where a Go timer of a few milliseconds wakes the thread twice
// (the poller sleeps in whole milliseconds, rounded down).
func newTicker(d time.Duration) (*os.File, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	ts := unix.NsecToTimespec(d.Nanoseconds())
	if err := unix.TimerfdSettime(fd, 0, &unix.ItimerSpec{Interval: ts, Value: ts}, nil); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "cyclefloor-ticker"), nil
}

// readNow reads what the stream has, without waiting.
func readNow(rc syscall.RawConn, buf []byte) (int, error) {
	var n int
	var rerr error
	if err := rc.Control(func(fd uintptr) { n, rerr = rawRead(fd, buf) }); err != nil {
		return 0, err
	}
	if rerr == syscall.EAGAIN {
		return 0, nil
	}
	return max(n, 0), rerr
}

// readBatch waits for the descriptor to be readable (for a socket, its low-water
// mark) or for its deadline, then reads what is there, even below the mark.
func readBatch(rc syscall.RawConn, buf []byte) (int, error) {
	var n int
	var rerr error
	err := rc.Read(func(fd uintptr) bool {
		n, rerr = rawRead(fd, buf)
		return rerr != syscall.EAGAIN
	})
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return readNow(rc, buf)
	}
	if err == nil {
		err = rerr
	}
	return max(n, 0), err
}

// drain takes the answers that have arrived, without waiting.
func drain(rc syscall.RawConn, buf []byte) error {
	for {
		n, err := readNow(rc, buf)
		if err != nil || n < len(buf) {
			return err
		}
	}
}

// runPeer dials the floor's two addresses and plays the walsender on the first (one
// write per transaction, rate a second, paced per millisecond) and the broker on the
// second (an 8-byte answer to each length-prefixed request), until d has passed.
func runPeer(addrs string, rate, eventBytes int, d time.Duration) error {
	streamAddr, brokerAddr, ok := strings.Cut(addrs, ",")
	if !ok {
		return fmt.Errorf("-peer %q: want stream,broker", addrs)
	}
	stream, err := net.Dial("tcp", streamAddr)
	if err != nil {
		return err
	}
	broker, err := net.Dial("tcp", brokerAddr)
	if err != nil {
		return err
	}
	go func() {
		r := bufio.NewReaderSize(broker, 1<<20)
		var hdr [4]byte
		answer := make([]byte, 8)
		for {
			if _, err := io.ReadFull(r, hdr[:]); err != nil {
				return
			}
			if _, err := r.Discard(int(binary.BigEndian.Uint32(hdr[:]))); err != nil {
				return
			}
			if _, err := broker.Write(answer); err != nil {
				return
			}
		}
	}()
	tx := make([]byte, eventBytes)
	end := time.Now().Add(d)
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	start, sent := time.Now(), 0
	for now := range t.C {
		if now.After(end) {
			return nil
		}
		due := int(float64(rate) * now.Sub(start).Seconds())
		for ; sent < due; sent++ {
			if _, err := stream.Write(tx); err != nil {
				return nil // the floor is done
			}
		}
	}
	return nil
}

// rawRead and writeAll make their system calls without telling the runtime, as the
// relay's connections do (internal/quietconn): a call the runtime sees wakes its
// monitor thread, a wake-up the floor would count and the relay does not pay.
func rawRead(fd uintptr, buf []byte) (int, error) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

func writeAll(rc syscall.RawConn, b []byte) error {
	var werr error
	err := rc.Write(func(fd uintptr) bool {
		for len(b) > 0 {
			n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
			if errno == syscall.EAGAIN {
				return false
			}
			if errno != 0 {
				werr = errno
				return true
			}
			b = b[n:]
		}
		return true
	})
	if err != nil {
		return err
	}
	return werr
}

// accept takes the peer's one connection; a peer that failed to start is an error
// within seconds, not a hang.
func accept(l net.Listener) (*net.TCPConn, error) {
	defer l.Close()
	l.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
	c, err := l.Accept()
	if err != nil {
		return nil, fmt.Errorf("the peer did not connect: %w", err)
	}
	return c.(*net.TCPConn), nil
}

func setLowat(rc syscall.RawConn, n int) error {
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, n)
	}); err != nil {
		return err
	}
	return serr
}

func cpu() time.Duration {
	c, _ := schedstat.Run("self")
	return c
}

// selfSwitches is this process's thread switches so far.
func selfSwitches() int64 {
	n, _ := schedstat.Switches("self")
	return n
}
