package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPollConsole checks that the harness asks what the console's page asks:
// /status once, then /overview on every tick, each after the first with ?since=
// the newest sample the previous answer held.
func TestPollConsole(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	overviews := 0
	latest := []string{"2026-12-07T10:00:00Z", "2026-12-07T10:00:10Z"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.RequestURI())
		n := len(asked)
		mu.Unlock()
		switch r.URL.Path {
		case "/status":
			_, _ = w.Write([]byte(`{}`))
		case "/overview":
			mu.Lock()
			overviews++
			n = overviews
			mu.Unlock()
			_, _ = w.Write([]byte(`{"stats_interval_seconds":10,"latest":{"at":"` + latest[min(n, 2)-1] + `"},"samples":[]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	var stats []time.Duration
	every := func(s time.Duration) time.Duration { stats = append(stats, s); return 20 * time.Millisecond }
	polls, size, err := pollConsole(t.Context(), srv.Client(), srv.URL, every, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) == 0 || stats[0] != 10*time.Second {
		t.Errorf("the wait after a poll was asked for stats intervals %v, want the answer's 10s", stats)
	}
	mu.Lock()
	defer mu.Unlock()
	if polls < 3 || polls > 16 || size == 0 {
		t.Fatalf("%d polls of %d bytes in 300ms at 20ms, want 3 to 16 of some bytes; asked %q", polls, size, asked)
	}
	if asked[0] != "/status" || asked[1] != "/overview" {
		t.Fatalf("asked %q, want /status then /overview without since", asked[:2])
	}
	if want := "/overview?since=2026-12-07T10%3A00%3A00Z"; asked[2] != want {
		t.Errorf("second poll %q, want %q", asked[2], want)
	}
	for _, a := range asked[3:] {
		if a != "/overview?since=2026-12-07T10%3A00%3A10Z" {
			t.Errorf("later poll %q, want since the newest sample", a)
		}
	}
	if strings.Count(strings.Join(asked, " "), "/status") != 1 {
		t.Errorf("asked %q, want /status once", asked)
	}
}

// The page polls at the relay's stats interval, within 2 and 10 s.
func TestConsolePollEvery(t *testing.T) {
	for _, c := range []struct{ stats, want time.Duration }{
		{0, 2 * time.Second}, {250 * time.Millisecond, 2 * time.Second}, {5 * time.Second, 5 * time.Second},
		{10 * time.Second, 10 * time.Second}, {time.Minute, 10 * time.Second},
	} {
		if got := consolePollEvery(c.stats); got != c.want {
			t.Errorf("consolePollEvery(%s) = %s, want %s", c.stats, got, c.want)
		}
	}
}

func TestConsoleGoal(t *testing.T) {
	c := &consoleIdleResult{SecondsPerStep: 100, Rounds: make([]consoleRound, 2), ClosedMsPerS: 0.50, OpenMsPerS: 0.53}
	var b strings.Builder
	writeConsoleGoal(&b, c)
	if line := b.String(); !strings.Contains(line, "(+0.030);") || !strings.HasSuffix(line, "| met |\n") {
		t.Errorf("open console 0.03 ms/s above closed: %q, want +0.030 and met", line)
	}
	c.OpenMsPerS = 0.60
	b.Reset()
	writeConsoleGoal(&b, c)
	if line := b.String(); !strings.Contains(line, "**not met**") {
		t.Errorf("open console 0.10 ms/s above closed: %q, want not met", line)
	}
}
