package relay

// Ready reports whether the relay is connected and moving events, and why not:
// what /readyz?streaming answers (package admin).
func (r *Relay) Ready() (bool, string) { return r.readiness(false) }

// Available reports whether the relay does its job: moving events, or a standby
// waiting for the leadership lock with nothing wrong (not paused, the broker
// answering), ready to take over. What /readyz answers, so that an orchestrator
// keeps the standby of a pair in service (docs/operations.md, "Health").
func (r *Relay) Available() (bool, string) { return r.readiness(true) }

func (r *Relay) readiness(standbyReady bool) (bool, string) {
	switch down, waiting := r.brokerDown.Load(), r.waiting.Load(); {
	case r.pause.Paused():
		return false, "paused: resume with walrelay resume or POST /resume"
	case down != nil:
		return false, *down
	case r.schemas != nil && r.schemas.down.Load() != nil:
		return false, *r.schemas.down.Load()
	case r.stalled.Load():
		return false, "stalled: slot lag grows while the confirmed LSN does not move"
	case waiting != nil:
		return false, *waiting
	case r.standby.Load():
		return standbyReady, "standby: another instance streams slot " + r.cfg.Slot
	case !r.active.Load():
		if r.cfg.Mode == ModePoll {
			return false, "not polling: the last poll failed or none ran yet"
		}
		return false, "not streaming: connecting to PostgreSQL or Kafka"
	case r.cfg.Mode == ModePoll:
		return true, "polling"
	default:
		return true, "streaming"
	}
}
