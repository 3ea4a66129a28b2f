package relay

import (
	"testing"
	"time"
)

// Tickers of one interval started at different moments tick at the same instants:
// the next multiple of the interval since the Unix epoch, never now itself.
func TestAlignedTicksFallOnMultiplesOfTheInterval(t *testing.T) {
	base := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		now   time.Time
		every time.Duration
		want  time.Time
	}{
		{base.Add(1 * time.Millisecond), time.Second, base.Add(time.Second)},
		{base.Add(999 * time.Millisecond), time.Second, base.Add(time.Second)},
		{base, time.Second, base.Add(time.Second)},
		{base.Add(1234 * time.Millisecond), 500 * time.Millisecond, base.Add(1500 * time.Millisecond)},
		{base.Add(1500 * time.Millisecond), 500 * time.Millisecond, base.Add(2 * time.Second)},
	} {
		if got := nextAlignedTick(c.now, c.every); !got.Equal(c.want) {
			t.Errorf("nextAlignedTick(%s, %s) = %s, want %s", c.now.Format(time.StampMilli), c.every,
				got.Format(time.StampMilli), c.want.Format(time.StampMilli))
		}
	}
}

// A ticker started anywhere in an interval first ticks at the interval's end, and
// again at the next one after rearm.
func TestAlignedTickerTicksAtTheIntervalsEnd(t *testing.T) {
	const every = 50 * time.Millisecond
	ticker := newAlignedTicker(every)
	defer ticker.stop()
	for range 3 {
		at := <-ticker.C()
		if off := at.UnixNano() % int64(every); off > int64(every)/2 {
			t.Fatalf("tick at %s is %s into its interval of %s, not at its start", at.Format(time.StampMicro), time.Duration(off), every)
		}
		ticker.rearm()
	}
}
