package quietconn

import (
	"io"
	"net"
	"sync"
	"syscall"
	"unsafe"
)

// Conn is a *net.TCPConn whose Read and Write make their system calls quietly. Every
// other method is the TCPConn's, SyscallConn included.
type Conn struct {
	*net.TCPConn
	raw syscall.RawConn

	// Each direction keeps its call's state here, so that the function handed to the
	// poller is made once, not allocated per call; the mutex keeps two concurrent
	// calls of one direction from sharing it, as net.Conn allows them.
	r, w direction
}

type direction struct {
	mu  sync.Mutex
	buf []byte
	n   int
	err syscall.Errno
	fn  func(fd uintptr) bool
}

// Wrap makes c quiet when it is a *net.TCPConn, and returns it unchanged otherwise.
func Wrap(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	q := &Conn{TCPConn: tc, raw: raw}
	q.r.fn = q.readFd
	q.w.fn = q.writeFd
	return q
}

// Read reads as net.Conn does: it waits for data through the runtime's poller,
// honouring the read deadline, and returns io.EOF when the peer closed.
func (c *Conn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	c.r.buf, c.r.n, c.r.err = b, 0, 0
	err := c.raw.Read(c.r.fn)
	n, errno := c.r.n, c.r.err
	c.r.buf = nil
	switch {
	case err != nil:
		return 0, err // a deadline, or the connection closed
	case errno != 0:
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: errno}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// readFd reads once; false asks the poller to wait for readiness first.
func (c *Conn) readFd(fd uintptr) bool {
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(c.r.buf))), uintptr(len(c.r.buf)))
		switch errno {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		c.r.n, c.r.err = int(n), errno
		return true
	}
}

// Write writes all of b as net.Conn does, waiting through the runtime's poller while
// the socket's buffer is full and honouring the write deadline.
func (c *Conn) Write(b []byte) (int, error) {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	c.w.buf, c.w.n, c.w.err = b, 0, 0
	err := c.raw.Write(c.w.fn)
	n, errno := c.w.n, c.w.err
	c.w.buf = nil
	switch {
	case err != nil:
		return n, err
	case errno != 0:
		return n, &net.OpError{Op: "write", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: errno}
	}
	return n, nil
}

// writeFd writes what is left; false asks the poller to wait for room first.
func (c *Conn) writeFd(fd uintptr) bool {
	for len(c.w.buf) > 0 {
		n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(c.w.buf))), uintptr(len(c.w.buf)))
		switch errno {
		case 0:
			c.w.n += int(n)
			c.w.buf = c.w.buf[n:]
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.w.err = errno
			return true
		}
	}
	return true
}
