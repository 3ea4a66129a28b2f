package replication

import (
	"context"
	"time"

	"github.com/jackc/pglogrepl"
)

// checkTimeout bounds one StreamConfig.BeforeConfirm call.
const checkTimeout = 10 * time.Second

// confirmCheck runs StreamConfig.BeforeConfirm beside the stream's reads, one call
// at a time, started at a status interval. A call allows the LSN that was
// confirmable when it started: everything up to that LSN had been received by then,
// which is all the check's argument needs (TableWatch.Check). The stream confirms
// the newest LSN a passed call allows as soon as it sees the call pass, so its
// confirmations trail the status interval by the call's duration, and a call that
// fails ends the session before its LSN is confirmed. Reading on meanwhile keeps a
// slow catalog query from stalling the stream (BENCHMARKS.md, "Latency tail").
type confirmCheck struct {
	allowed pglogrepl.LSN // the newest LSN a passed call allows
	running bool
	lsn     pglogrepl.LSN // what the running call will allow
	done    chan error
	cancel  context.CancelFunc
}

// allow returns how much of want may be confirmed now: want once a call that
// started at it (or later) passed, else the newest LSN allowed so far. It collects a
// finished call, and starts one for want when none runs and want is not allowed.
func (c *confirmCheck) allow(want pglogrepl.LSN, check func(context.Context) error) (pglogrepl.LSN, error) {
	if c.running {
		select {
		case err := <-c.done:
			if err := c.collect(err); err != nil {
				return c.allowed, err
			}
		default:
		}
	}
	if !c.running && want > c.allowed {
		c.start(want, check)
	}
	return min(want, c.allowed), nil
}

// passed reports whether the running call finished: the stream then confirms what
// it allows (collected by allowNow), without waiting for the next status interval.
func (c *confirmCheck) passed() bool { return c.running && len(c.done) > 0 }

// allowNow collects the finished call and returns how much of want may be confirmed;
// unlike allow it starts no call, so that calls keep to one per status interval.
func (c *confirmCheck) allowNow(want pglogrepl.LSN) (pglogrepl.LSN, error) {
	if err := c.collect(<-c.done); err != nil {
		return c.allowed, err
	}
	return min(want, c.allowed), nil
}

// finish waits for the running call, then checks want itself when it is not
// allowed yet: the stream's last confirmation.
func (c *confirmCheck) finish(want pglogrepl.LSN, check func(context.Context) error) error {
	for {
		if c.running {
			if err := c.collect(<-c.done); err != nil {
				return err
			}
		}
		if want <= c.allowed {
			return nil
		}
		c.start(want, check)
	}
}

// stop cancels the running call and waits for it: the check's connection is not
// used once the stream returned.
func (c *confirmCheck) stop() {
	if c.running {
		c.cancel()
		<-c.done
		c.running = false
	}
}

func (c *confirmCheck) start(lsn pglogrepl.LSN, check func(context.Context) error) {
	if c.done == nil {
		c.done = make(chan error, 1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	c.running, c.lsn, c.cancel = true, lsn, cancel
	done := c.done
	go func() { done <- check(ctx) }()
}

func (c *confirmCheck) collect(err error) error {
	c.running = false
	c.cancel()
	if err != nil {
		return err
	}
	c.allowed = max(c.allowed, c.lsn)
	return nil
}
