package replication

import (
	"crypto/tls"
	"net"
	"syscall"
	"time"

	"github.com/walrelay/walrelay/internal/quietconn"
)

// Read batching. A relay that keeps up with the walsender wakes for every few
// messages the kernel has: a read, a park on the poller and a wake-up, which cost
// far more than decoding the messages. While bytes arrive steadily, the socket's
// receive low-water mark (SO_RCVLOWAT) makes the kernel hold them back until
// batchBytes are there, and the read deadline wakes the stream batchWait after the
// last clock reading at the latest: a fast stream (a backlog drain) is read 16 KiB at
// a time, a moderate one (thousands of small transactions a second) once per
// batchWait, all the transactions of that time in one wake-up. Both cut relay CPU per
// event (docs/performance.md, "Moderate rates"). The price is up to batchWait of
// latency, so batching is on only while the bytes of a rate window arrive at onRate
// or faster, and off again below a quarter of it: a slow stream (up to about 125
// single-event transactions a second) is read as it comes.
const (
	batchBytes = 16 << 10
	// batchWait bounds how long a batching read may hold back the bytes it has.
	batchWait = 2 * time.Millisecond
	// onRate is the arrival rate, in bytes a second, from which batching is on:
	// about 500 single-event transactions a second, one or more per batchWait. At
	// 1,000 a second that took a sixth off the relay's CPU per event for about 1 ms
	// more hand-over at p50 (docs/performance.md, "Moderate rates: read batching from
	// 500 transactions a second").
	onRate = 256 << 10
	// rateWindow is the shortest time the arrival rate is measured over, so that
	// one burst, or one pause of the walsender, does not switch the mode: long
	// enough to hold several transactions at the rates near the thresholds.
	rateWindow = 100 * time.Millisecond
)

// readBatching decides when to batch reads and sets the socket option.
type readBatching struct {
	raw syscall.RawConn // nil: not TCP (a Unix socket), batching stays off
	on  bool

	windowStart time.Time
	windowBytes int
}

func newReadBatching(c net.Conn) *readBatching {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	b := &readBatching{}
	if tc, ok := quietconn.TCP(c); ok {
		b.raw, _ = tc.SyscallConn()
	}
	return b
}

// received counts the bytes of one message.
func (b *readBatching) received(n int) { b.windowBytes += n }

// observe is called when the stream reads the clock. It turns batching on when the
// bytes of the last rateWindow came at onRate or faster, and off below a quarter of
// that, so the rate has to change a lot before the mode does.
func (b *readBatching) observe(now time.Time) {
	elapsed := now.Sub(b.windowStart)
	if elapsed < rateWindow {
		return
	}
	onAt := onRate * int64(elapsed) / int64(time.Second) // bytes in elapsed at onRate
	switch got := int64(b.windowBytes); {
	case got >= onAt:
		b.set(true)
	case got < onAt/4:
		b.set(false)
	}
	b.windowStart, b.windowBytes = now, 0
}

// deadline is the read deadline: the status timer, or sooner while batching.
func (b *readBatching) deadline(lastClock, nextStatus time.Time) time.Time {
	if b.on {
		if d := lastClock.Add(batchWait); d.Before(nextStatus) {
			return d
		}
	}
	return nextStatus
}

// set switches the socket's low-water mark, when the mode changes.
func (b *readBatching) set(on bool) {
	if b.raw == nil || on == b.on {
		return
	}
	lowat := 1 // the default: readable as soon as one byte is there
	if on {
		lowat = batchBytes
	}
	var serr error
	if err := b.raw.Control(func(fd uintptr) { serr = setRcvLowat(fd, lowat) }); err != nil || serr != nil {
		b.raw = nil // the option does not work here: keep the mode the kernel has, stop trying
		return
	}
	b.on = on
}
