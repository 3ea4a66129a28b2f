package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/walrelay/walrelay/sink"
)

// watchBroker makes a broker that stops acknowledging an incident within
// Config.AckTimeout (docs/operations.md, "Health"): once the oldest event handed to
// the sink has waited longer, it logs at WARN what it knows, /readyz answers 503
// naming the brokers and walrelay_broker_up is 0; when the broker answers again and
// nothing waits that long any more, it logs how long the outage lasted and how many
// events were delivered since. While nothing is in flight the probe's verdicts
// (brokerprobe.go) do the same for a broker that no longer answers at all, judged at
// the next tick; nil verdicts: no probe.
func (r *Relay) watchBroker(ctx context.Context, verdicts <-chan probeVerdict) error {
	tick := min(max(r.cfg.AckTimeout/10, 50*time.Millisecond), time.Second)
	ticker := newAlignedTicker(tick)
	defer ticker.stop()
	var (
		down       bool
		byProbe    bool      // the outage is the probe's: a probe that answers ends it
		since      time.Time // when the oldest unacknowledged event was sent, or the first failed probe
		noticed    time.Time // when the outage was noticed
		ackedThen  int64     // acks counted when the outage was noticed
		lastWarned time.Time
		busySince  time.Time    // when events were last in flight
		probe      probeVerdict // the last probe's
	)
	r.metrics.brokerUp.Set(1)
	for {
		select {
		case <-ctx.Done():
			return nil
		case probe = <-verdicts:
		case now := <-ticker.C():
			ticker.rearm()
			r.acks.rotate(now)
			age, events := r.acks.oldest(now)
			if events > 0 {
				busySince = now
			}
			// A failed probe stands until a later one answers or an event is acknowledged.
			unanswered := probe.err != nil && r.acks.acked.Load() == probe.acked
			switch {
			case age > r.cfg.AckTimeout && !down:
				down, byProbe, since, noticed, ackedThen, lastWarned = true, false, now.Add(-age), now, r.acks.acked.Load(), now
				r.brokerDown.Store(new(r.brokerReason(age, events)))
				r.metrics.brokerUp.Set(0)
				r.log.Warn("broker not acknowledging: the oldest event in flight has waited longer than the ack timeout; "+
					"check that the brokers are up and reachable (events are kept and sent again, none is lost)",
					r.brokerAttrs(age, events)...)
			case age > r.cfg.AckTimeout:
				r.brokerDown.Store(new(r.brokerReason(age, events)))
				if now.Sub(lastWarned) >= time.Minute {
					lastWarned = now
					r.log.Warn("broker still not acknowledging", r.brokerAttrs(age, events)...)
				}
			case unanswered && !down:
				down, byProbe, since, noticed, ackedThen, lastWarned = true, true, probe.started, now, r.acks.acked.Load(), now
				r.brokerDown.Store(new(r.probeReason(probe)))
				r.metrics.brokerUp.Set(0)
				r.log.Warn("broker not answering: its probe failed while no event was in flight; "+
					"check that the brokers are up and reachable (events written meanwhile are kept and sent once it answers)",
					r.probeAttrs(probe)...)
			case unanswered:
				byProbe = true
				r.brokerDown.Store(new(r.probeReason(probe)))
				if now.Sub(lastWarned) >= time.Minute {
					lastWarned = now
					r.log.Warn("broker still not answering", r.probeAttrs(probe)...)
				}
			case down && r.acks.acked.Load() > ackedThen:
				down = false
				r.brokerDown.Store(nil)
				r.metrics.brokerUp.Set(1)
				r.log.Info(fmt.Sprintf("broker back after %s, %d events delivered", now.Sub(since).Round(time.Second),
					r.acks.acked.Load()-ackedThen), "brokers", r.cfg.BrokerAddrs, "outage_seconds", now.Sub(since).Seconds())
			case down && byProbe && probe.err == nil && probe.started.After(noticed):
				// Only the probe's own outage: an answer to a probe does not show that
				// the broker takes events again.
				down = false
				r.brokerDown.Store(nil)
				r.metrics.brokerUp.Set(1)
				r.log.Info(fmt.Sprintf("broker answering again after %s", now.Sub(since).Round(time.Second)),
					"brokers", r.cfg.BrokerAddrs, "outage_seconds", now.Sub(since).Seconds())
			case down && !byProbe && now.Sub(busySince) >= r.cfg.AckTimeout:
				// The events that waited were answered with errors and nothing was
				// sent since: nothing waits for the broker, so it is no incident now.
				down = false
				r.brokerDown.Store(nil)
				r.metrics.brokerUp.Set(1)
				r.log.Info("nothing waits for the broker any more; no event was acknowledged since it stopped",
					"brokers", r.cfg.BrokerAddrs, "since", since.UTC().Format(time.RFC3339))
			}
		}
	}
}

// probeReason is /readyz's answer while the broker does not answer its probe.
func (r *Relay) probeReason(v probeVerdict) string {
	reason := fmt.Sprintf("broker not answering: no event in flight, and its probe (every %s) failed: %s",
		r.cfg.BrokerProbeInterval, r.probeError(v.err))
	if len(r.cfg.BrokerAddrs) > 0 {
		reason += "; brokers " + strings.Join(r.cfg.BrokerAddrs, ", ")
	}
	return reason
}

func (r *Relay) probeAttrs(v probeVerdict) []any {
	return []any{"brokers", r.cfg.BrokerAddrs, "probe_error", r.probeError(v.err),
		"probe_interval", r.cfg.BrokerProbeInterval.String(), "ack_timeout", r.cfg.AckTimeout.String()}
}

// probeError says why a probe failed: a broker that is silent is named so, not
// left as a bare deadline.
func (r *Relay) probeError(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within the ack timeout (%s)", r.cfg.AckTimeout)
	}
	return err.Error()
}

// brokerReason is /readyz's answer while the broker does not acknowledge.
func (r *Relay) brokerReason(age time.Duration, events int64) string {
	reason := fmt.Sprintf("broker not acknowledging: %d events in flight, the oldest for %s (ack timeout %s)",
		events, age.Round(100*time.Millisecond), r.cfg.AckTimeout)
	if len(r.cfg.BrokerAddrs) > 0 {
		reason += "; brokers " + strings.Join(r.cfg.BrokerAddrs, ", ")
	}
	if err := r.producerError(); err != nil {
		reason += "; last error: " + err.Error()
	}
	return reason
}

func (r *Relay) brokerAttrs(age time.Duration, events int64) []any {
	attrs := []any{"brokers", r.cfg.BrokerAddrs, "inflight_events", events,
		"oldest_inflight_seconds", age.Round(100 * time.Millisecond).Seconds(), "ack_timeout", r.cfg.AckTimeout.String()}
	if err := r.producerError(); err != nil {
		attrs = append(attrs, "last_error", err.Error())
	}
	return attrs
}

// producerError is the last error the sink's client met talking to the broker, or
// else the last error a publish ended with.
func (r *Relay) producerError() error {
	if rep, ok := r.cfg.Sink.(sink.ErrorReporter); ok {
		if err := rep.LastError(); err != nil {
			return err
		}
	}
	return r.acks.lastError()
}
