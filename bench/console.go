package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// The console's page asks GET /overview as often as the relay takes a sample, its
// stats interval, within these bounds (admin/ui/console.js, schedule).
const (
	consolePollMin = 2 * time.Second
	consolePollMax = 10 * time.Second
)

// consolePollEvery is how often the page polls a relay whose stats interval is stats
// (0: not known yet).
func consolePollEvery(stats time.Duration) time.Duration {
	return min(max(stats, consolePollMin), consolePollMax)
}

// goalConsoleMsPerSec is how much CPU a second an open console may add to an idle
// relay (issue 43, item 8).
const goalConsoleMsPerSec = 0.05

// consoleIdleResult compares the idle relay with a console open and without, in
// the same process and the same minutes: rounds of one step each way, the order
// alternating so that neither side always follows the other.
type consoleIdleResult struct {
	SecondsPerStep float64        `json:"seconds_per_step"`
	Rounds         []consoleRound `json:"rounds"`
	// ClosedMsPerS and OpenMsPerS are over all rounds: the relay's CPU (its threads'
	// run time, in nanoseconds) over the seconds of each side.
	ClosedMsPerS float64 `json:"closed_cpu_ms_per_second"`
	OpenMsPerS   float64 `json:"open_cpu_ms_per_second"`
	// FloorClosedMsPerS and FloorOpenMsPerS are wakefloor's in the same seconds: how
	// far the machine moved between the sides by itself.
	FloorClosedMsPerS float64 `json:"floor_closed_cpu_ms_per_second,omitempty"`
	FloorOpenMsPerS   float64 `json:"floor_open_cpu_ms_per_second,omitempty"`
	Polls             int     `json:"overview_polls"`
	OverviewBytes     int     `json:"overview_answer_bytes"` // the last answer's size
	RSSKiB            int64   `json:"rss_kib"`
	LoadAvg           string  `json:"loadavg_after"`
}

// consoleRound is one step without a console and one with it.
type consoleRound struct {
	OpenFirst     bool    `json:"open_first"`
	ClosedMsPerS  float64 `json:"closed_cpu_ms_per_second"`
	OpenMsPerS    float64 `json:"open_cpu_ms_per_second"`
	FloorClosedMs float64 `json:"floor_closed_cpu_ms_per_second,omitempty"`
	FloorOpenMs   float64 `json:"floor_open_cpu_ms_per_second,omitempty"`
}

// Diff is what the open console added, ms a second.
func (c *consoleIdleResult) Diff() float64 { return c.OpenMsPerS - c.ClosedMsPerS }

// measureConsoleIdle lets the relay stand by with no writes for rounds × 2 steps of
// d: in each round one step with nothing asking it anything and one with a console
// open (GET /status once, then GET /overview?since=… as often as the page asks),
// the open step first in every other round.
func (e *env) measureConsoleIdle(ctx context.Context, rp *relayProc, d time.Duration, rounds int) (consoleIdleResult, error) {
	res := consoleIdleResult{SecondsPerStep: d.Seconds()}
	var closedCPU, openCPU, floorClosed, floorOpen float64
	for i := range rounds {
		round := consoleRound{OpenFirst: i%2 == 1}
		for _, open := range []bool{round.OpenFirst, !round.OpenFirst} {
			cpu0, err := cpuSeconds(rp.pid())
			if err != nil {
				return res, fmt.Errorf("console idle: read the relay's CPU: %w", err)
			}
			floor := e.startFloor(ctx, d)
			if open {
				polls, size, err := pollConsole(ctx, http.DefaultClient, rp.baseURL, consolePollEvery, d)
				if err != nil {
					return res, fmt.Errorf("console idle: %w; relay log: %s", err, rp.logPath)
				}
				res.Polls += polls
				res.OverviewBytes = size
			} else if err := pause(ctx, d); err != nil {
				return res, err
			}
			f := floor()
			cpu1, err := cpuSeconds(rp.pid())
			if err != nil {
				return res, fmt.Errorf("console idle: read the relay's CPU: %w", err)
			}
			msPerS := (cpu1 - cpu0) * 1e3 / d.Seconds()
			if open {
				round.OpenMsPerS, round.FloorOpenMs = msPerS, f
				openCPU += msPerS
				floorOpen += f
			} else {
				round.ClosedMsPerS, round.FloorClosedMs = msPerS, f
				closedCPU += msPerS
				floorClosed += f
			}
		}
		progress("  console round %d: closed %.3f ms/s, open %.3f ms/s (wakefloor %.3f; %.3f)",
			i+1, round.ClosedMsPerS, round.OpenMsPerS, round.FloorClosedMs, round.FloorOpenMs)
		res.Rounds = append(res.Rounds, round)
	}
	n := float64(rounds)
	res.ClosedMsPerS, res.OpenMsPerS = closedCPU/n, openCPU/n
	res.FloorClosedMsPerS, res.FloorOpenMsPerS = floorClosed/n, floorOpen/n
	res.RSSKiB, _ = statusKB(rp.pid(), "VmRSS")
	if l, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(l)); len(f) >= 3 {
			res.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	progress("  console: closed %.3f ms/s, open %.3f ms/s over %d × %s each (%+.3f ms/s; %d polls of %d bytes), RSS %s",
		res.ClosedMsPerS, res.OpenMsPerS, rounds, d, res.Diff(), res.Polls, res.OverviewBytes, bytesIEC(res.RSSKiB<<10))
	return res, nil
}

// pollConsole asks base what the console's page asks for d: GET /status once, then
// GET /overview, each with ?since= the newest sample it has (the page asks only for
// the samples it does not have), again after every(the stats interval the answer
// gave). It returns the polls made and the size of the last answer.
func pollConsole(ctx context.Context, client *http.Client, base string, every func(stats time.Duration) time.Duration, d time.Duration) (polls, size int, err error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	get := func(path string) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
		}
		return body, nil
	}
	if _, err := get("/status"); err != nil {
		return 0, 0, ignoreDeadline(ctx, err)
	}
	var since string
	for {
		q := ""
		if since != "" {
			q = "?since=" + url.QueryEscape(since)
		}
		body, err := get("/overview" + q)
		if err != nil {
			return polls, size, ignoreDeadline(ctx, err)
		}
		polls, size = polls+1, len(body)
		var o struct {
			StatsInterval float64 `json:"stats_interval_seconds"`
			Latest        *struct {
				At string `json:"at"`
			} `json:"latest"`
		}
		if err := json.Unmarshal(body, &o); err != nil {
			return polls, size, fmt.Errorf("GET /overview: %w", err)
		}
		if o.Latest != nil {
			since = o.Latest.At
		}
		select {
		case <-ctx.Done():
			return polls, size, nil
		case <-time.After(every(time.Duration(o.StatsInterval * float64(time.Second)))):
		}
	}
}

// ignoreDeadline drops the error of a request that the step's end cut short.
func ignoreDeadline(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// writeConsoleGoal prints the goals table's row for the open console.
func writeConsoleGoal(w io.Writer, c *consoleIdleResult) {
	if c == nil || len(c.Rounds) == 0 {
		return
	}
	fmt.Fprintf(w, "| idle with a console open (GET /overview at the stats interval, 2–10 s): ≤ %.2f ms/s more than closed | %.3f ms/s open, %d × %gs | %.3f ms/s closed (%+.3f); wakefloor %.3f; %.3f | %s |\n",
		goalConsoleMsPerSec, c.OpenMsPerS, len(c.Rounds), c.SecondsPerStep, c.ClosedMsPerS, c.Diff(),
		c.FloorClosedMsPerS, c.FloorOpenMsPerS, verdict(c.Diff() <= goalConsoleMsPerSec))
}
