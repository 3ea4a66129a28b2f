package admin_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The page asks GET /overview as often as the relay takes a sample: FixedConsole's
// relay samples every 10 s, so after the first answer the next poll comes 10 s later,
// not 2 (docs/operations.md, "Console": what it costs).
func TestConsolePollsAtTheStatsInterval(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	url := fixedConsole(t, time.Now())

	b.do("open the console", chromedp.Navigate(url+"/ui/"))
	polls := func() []time.Time {
		b.mu.Lock()
		defer b.mu.Unlock()
		return append([]time.Time(nil), b.overviewAt...)
	}
	waitFor(t, 30*time.Second, "the second poll of /overview", func() bool { return len(polls()) >= 2 })
	p := polls()
	if gap := p[1].Sub(p[0]); gap < 9*time.Second || gap > 12*time.Second {
		t.Errorf("the page polled again after %s, want the stats interval of 10s", gap.Round(time.Millisecond))
	}
}
