package relay

import (
	"context"
	"time"
)

// probeVerdict is what one probe of the broker found.
type probeVerdict struct {
	err     error     // nil: the broker answered
	started time.Time // when the probe was sent
	acked   int64     // acks counted when it was sent
}

// probeBroker asks the broker whether it answers (sink.Sink.Ping) every
// Config.BrokerProbeInterval while no event is in flight, and hands each verdict to
// the broker watch, which owns the signals (brokerwatch.go). While events are in
// flight their acks tell, so no probe is sent. A probe waits at most
// Config.AckTimeout, so a broker that stops answering while the outbox is idle is an
// incident within the ack timeout plus one interval, and the watch's tick
// (docs/design.md invariant 11).
// It runs on a goroutine of its own: a probe waiting for a silent broker holds up
// neither the stream nor the watch's ticks. Its ticks fall on the multiples of the
// interval, with the watch's and the leadership ping's, so an idle relay wakes up no
// more often than before (docs/performance.md, "Several databases").
func (r *Relay) probeBroker(ctx context.Context, verdicts chan<- probeVerdict) error {
	ticker := newAlignedTicker(r.cfg.BrokerProbeInterval)
	defer ticker.stop()
	for {
		var now time.Time
		select {
		case <-ctx.Done():
			return nil
		case now = <-ticker.C():
		}
		if _, events := r.acks.oldest(now); events == 0 {
			v := probeVerdict{started: now, acked: r.acks.acked.Load()}
			pingCtx, cancel := context.WithTimeout(ctx, r.cfg.AckTimeout)
			v.err = r.cfg.Sink.Ping(pingCtx)
			cancel()
			if ctx.Err() != nil {
				return nil
			}
			select {
			case verdicts <- v:
			case <-ctx.Done():
				return nil
			}
		}
		ticker.rearm() // after the probe: a slow one is never overlapped by the next
	}
}
