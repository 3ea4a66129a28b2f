// Package quietconn wraps a TCP connection so that its reads and writes do not wake
// the Go runtime's monitor thread.
//
// Why: every system call a goroutine makes through the syscall package tells the
// runtime it may block, and the first one after the process was idle wakes the
// monitor thread (sysmon), which then checks every 20µs, a thread switch each time,
// until the process is idle again. A relay that keeps up with a moderate stream is
// idle between short bursts of work several hundred times a second, so the monitor
// ends up switching more often than the relay's own threads: at 5,000 events/s it was
// a third of the relay's CPU (docs/performance.md, "Moderate rates: the runtime's
// monitor thread and one processor"). A read or write
// on a non-blocking socket never blocks, so it does not need the runtime told: this
// package makes those two calls directly and leaves waiting for readiness, deadlines
// and closing to the runtime's poller, as the net package does.
package quietconn

import (
	"context"
	"net"
)

// Dial wraps dial so that the TCP connections it makes are quiet; other kinds (a
// Unix-domain socket) come back as they are.
func Dial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return Wrap(c), nil
	}
}

// TCP is the TCP connection under c, quiet or not.
func TCP(c net.Conn) (*net.TCPConn, bool) {
	switch c := c.(type) {
	case *net.TCPConn:
		return c, true
	case *Conn:
		return c.TCPConn, true
	}
	return nil, false
}
