package relay

import "time"

// alignedTicker ticks every interval at the multiples of the interval since the
// Unix epoch, not at the multiples since it started, so that the relays of one
// process (relay.Group) that tick at the same interval wake up together. On an idle
// process each wake-up of the Go runtime costs more than the check it runs
// (docs/performance.md, "Several databases: what each idle database adds").
// Like a time.Ticker it never ticks twice for one interval missed.
type alignedTicker struct {
	every time.Duration
	timer *time.Timer
}

func newAlignedTicker(every time.Duration) *alignedTicker {
	now := time.Now()
	return &alignedTicker{every: every, timer: time.NewTimer(nextAlignedTick(now, every).Sub(now))}
}

// C is the channel of the next tick. After a receive, rearm arms the one after.
func (t *alignedTicker) C() <-chan time.Time { return t.timer.C }

// rearm sets the timer to the next multiple of the interval after now.
func (t *alignedTicker) rearm() {
	now := time.Now()
	t.timer.Reset(nextAlignedTick(now, t.every).Sub(now))
}

func (t *alignedTicker) stop() { t.timer.Stop() }

// nextAlignedTick is the first multiple of every since the Unix epoch after now.
func nextAlignedTick(now time.Time, every time.Duration) time.Time {
	return time.Unix(0, (now.UnixNano()/int64(every)+1)*int64(every))
}
