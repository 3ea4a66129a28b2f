package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// results is everything a run measured; it is written as JSON.
type results struct {
	Started         time.Time         `json:"started"`
	DurationSeconds float64           `json:"duration_seconds"`
	Complete        bool              `json:"complete"`
	Error           string            `json:"error,omitempty"`
	Machine         machineInfo       `json:"machine"`
	Settings        settingsInfo      `json:"settings"`
	Drain           *drainScenario    `json:"backlog_drain,omitempty"`
	Latency         []latencyResult   `json:"latency,omitempty"`
	Idle            *idleResult       `json:"idle,omitempty"`
	HighestRateHeld int               `json:"highest_rate_held"`
	Modes           []modeResult      `json:"modes,omitempty"`
	Pgoutput        []pgoutputResult  `json:"pgoutput,omitempty"`
	Databases       []databasesResult `json:"databases,omitempty"`
	Converters      []converterResult `json:"converters,omitempty"`
}

type machineInfo struct {
	CPUs        int    `json:"cpus"`
	CPUModel    string `json:"cpu_model"`
	MemoryBytes int64  `json:"memory_bytes"`
	Kernel      string `json:"kernel"`
	Go          string `json:"go"`
	PostgreSQL  string `json:"postgresql"`
	// BusyBefore is the share of all cores that other work kept busy in the 2s
	// before the harness started anything; LoadAvg is /proc/loadavg then.
	BusyBefore float64 `json:"busy_before_fraction"`
	LoadAvg    string  `json:"loadavg_before"`
}

type settingsInfo struct {
	Quick           bool              `json:"quick"`
	Events          int               `json:"backlog_events"`
	Repeats         int               `json:"repeats"`
	ModeEvents      int               `json:"mode_events"`
	PgoutputEvents  int               `json:"pgoutput_events"`
	ConverterEvents int               `json:"converter_events"`
	Rates           []int             `json:"rates"`
	RateSeconds     float64           `json:"rate_seconds"`
	Workers         int               `json:"load_workers"`
	Partitions      int               `json:"partitions"`
	BrokerDelayMS   float64           `json:"broker_produce_delay_ms,omitempty"`
	Aggregates      int               `json:"aggregates"`
	PayloadBytes    int               `json:"payload_bytes"`
	RowsPerTx       int               `json:"rows_per_transaction"`
	PostgreSQL      map[string]string `json:"postgresql_settings"`
	Relay           string            `json:"relay"`
}

// defaults reports whether the sizes are the harness's defaults.
func (s settingsInfo) defaults() bool {
	return s.Events == 1_000_000 && s.Repeats == defaultRepeats && s.ModeEvents == 200_000 && s.PgoutputEvents == 500_000 && s.ConverterEvents == 200_000 && s.RateSeconds == 20 &&
		joinInts(s.Rates) == defaultRates && s.Workers == 8 && s.Partitions == 4 && s.BrokerDelayMS == 0 &&
		s.Aggregates == 10_000 && s.PayloadBytes == 200
}

func machine(pgVersion string) machineInfo {
	m := machineInfo{CPUs: runtime.NumCPU(), Go: runtime.Version(), PostgreSQL: pgVersion}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if kb, err := memTotalKB(); err == nil {
		m.MemoryBytes = kb << 10
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	return m
}

func memTotalKB() (int64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			var kb int64
			_, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kb)
			return kb, err
		}
	}
	return 0, fmt.Errorf("no MemTotal in /proc/meminfo")
}

func writeJSON(path string, r *results) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func writeMarkdownFile(path string, r *results) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	writeMarkdown(f, r)
	return f.Close()
}

// writeMarkdown prints the tables.
func writeMarkdown(w io.Writer, r *results) {
	m := r.Machine
	size := "default sizes"
	switch {
	case r.Settings.Quick:
		size = "-quick"
	case !r.Settings.defaults():
		size = "custom sizes"
	}
	fmt.Fprintf(w, "## walrelay benchmark, %s (%s)\n\n", r.Started.UTC().Format("2006-01-02 15:04 UTC"), size)
	fmt.Fprintf(w, "%d × %s, %s RAM, Linux %s, %s, PostgreSQL %s; everything on loopback.\n",
		m.CPUs, m.CPUModel, bytesIEC(m.MemoryBytes), m.Kernel, m.Go, m.PostgreSQL)
	fmt.Fprintf(w, "Other work kept the machine %.0f%% busy just before the run (load average %s).\n", m.BusyBefore*100, m.LoadAvg)
	lag := ""
	if d := r.Settings.BrokerDelayMS; d > 0 {
		lag = fmt.Sprintf(", holding each produce request %g ms (-broker-delay)", d)
	}
	fmt.Fprintf(w, "Payload %d B JSON, %s aggregates, kfake broker (%d partitions) in its own process%s; relay: %s.\n\n",
		r.Settings.PayloadBytes, commas(r.Settings.Aggregates), r.Settings.Partitions, lag, r.Settings.Relay)
	writeGoals(w, r)
	writeByLoad(w, r)

	if d := r.Drain; d != nil && len(d.Rounds) > 0 {
		fmt.Fprintf(w, "### Backlog drain: %s events, %d per transaction, %d round(s)\n\n", commas(d.Events), r.Settings.RowsPerTx, len(d.Rounds))
		fmt.Fprintln(w, "| | min | median | max |")
		fmt.Fprintln(w, "|---|--:|--:|--:|")
		row := func(name string, s summary, f func(float64) string) {
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", name, f(s.Min), f(s.Median), f(s.Max))
		}
		perSec := func(v float64) string { return commas(int(math.Round(v))) }
		row("walrelay events/s (start to last ack)", d.RelayRate, perSec)
		row("pg_recvlogical events/s (decode limit)", d.RecvRate, perSec)
		row("walrelay / pg_recvlogical", d.Ratio, func(v float64) string { return fmt.Sprintf("%.2f", v) })
		micros := func(v float64) string {
			if v <= 0 {
				return "-"
			}
			return fmt.Sprintf("%.1f", v)
		}
		row("relay CPU µs/event (= CPU s per million events)", d.CPUMicros, micros)
		row("walsender CPU µs/event, walrelay's", d.WalsenderCPU, micros)
		row("walsender CPU µs/event, pg_recvlogical's (sampled every 200ms)", d.RecvWalsender, micros)
		row("PostgreSQL CPU µs/event (whole server), walrelay drain", d.PostgresCPU, micros)
		row("PostgreSQL CPU µs/event (whole server), pg_recvlogical drain", d.RecvPostgres, micros)
		row("PostgreSQL CPU per event, walrelay drain / pg_recvlogical drain", d.PostgresCPURatio, func(v float64) string { return fmt.Sprintf("%.2f", v) })
		row("WAL the relay caused (to 10 s after the last confirm) / the inserts' WAL", d.RelayWALShare, pct)
		if d.PeerRate != nil {
			row("peer (-peer-cmd) events/s (start to last record consumed)", *d.PeerRate, perSec)
			row("peer / pg_recvlogical", *d.PeerRatio, func(v float64) string { return fmt.Sprintf("%.2f", v) })
			row("peer CPU µs/event (its process tree)", *d.PeerCPU, micros)
			row("PostgreSQL CPU µs/event (whole server), peer drain", *d.PeerPostgresCPU, micros)
		}
		row("broker (kfake) CPU µs/event", d.BrokerCPU, micros)
		row("machine busy during relay drain (both cores)", d.MachineBusy, func(v float64) string { return fmt.Sprintf("%.0f%%", v*100) })
		row("other processes' CPU s during relay drain (not ours)", d.OtherCPU, func(v float64) string { return fmt.Sprintf("%.1f", v) })
		fmt.Fprintf(w, "| relay peak RSS (max) | | %s | |\n\n", bytesIEC(d.PeakRSSBytes))
		if wa := d.Rounds[0].Relay.WAL; wa.RemovalChecked {
			fmt.Fprintf(w, "Removal of old rows (round 1, after the WAL above): %s.\n\n", removalSentence(wa))
		}
		fmt.Fprintln(w, "| round | walrelay s | walrelay events/s | pg_recvlogical s | pg_recvlogical events/s | ratio | relay CPU µs/event | peak RSS | read back (distinct) | others' CPU s (walrelay / pg_recvlogical run) |")
		fmt.Fprintln(w, "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
		for _, p := range d.Rounds {
			fmt.Fprintf(w, "| %d | %.2f | %s | %.2f | %s | %.2f | %.1f | %s | %s (%s) | %.1f / %.1f |\n", p.Round,
				p.Relay.Seconds, perSec(p.Relay.EventsPerSec), p.Recv.Seconds, perSec(p.Recv.EventsPerSec), p.Ratio,
				p.Relay.CPUMicrosPerEvent, bytesIEC(p.Relay.PeakRSSBytes), commas(p.Relay.ReadBack), commas(p.Relay.Distinct),
				p.Relay.OtherCPUSec, p.Recv.OtherCPUSec)
		}
		fmt.Fprintln(w)
	}

	if len(r.Latency) > 0 {
		fmt.Fprintf(w, "### Latency: single-event transactions from %d connections, %gs per rate\n\n", r.Settings.Workers, r.Settings.RateSeconds)
		fmt.Fprintln(w, "Commit to consume: the harness's client-side commit (INSERT returned) to the record fetched back, exact. "+
			"Created to hand-over: the row's created_at to the record's timestamp, which the relay sets as it hands the record to the producer "+
			"(the relay's share; same clock). "+
			"Relay commit to ack: walrelay_commit_to_ack_seconds bucket deltas, so each figure is a bucket's upper bound (≤). "+
			"Slot lag: pg_current_wal_lsn() − confirmed_flush_lsn, before and at the end of the load.")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| target/s | achieved/s | commit→consume p50 / p99 / p99.9 / max ms | over 10 ms | created→hand-over p50 / p99 / p99.9 / max ms | over 10 ms | relay commit→ack p99 / p99.9 ms (≤) | slot lag start → end (max) | tail after load | CPU µs/event: relay / walsender / PostgreSQL | others' CPU s | held |")
		fmt.Fprintln(w, "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|:-:|")
		for _, l := range r.Latency {
			fmt.Fprintf(w, "| %s | %s | %s / %s / %s / %s | %s | %s / %s / %s / %s | %s | %s / %s | %s → %s (%s) | %.2fs | %.1f / %.1f / %.1f | %.1f | %s |\n",
				commas(l.TargetRate), commas(int(math.Round(l.AchievedRate))),
				ms(l.E2EP50ms), ms(l.E2EP99ms), ms(l.E2EP999ms), ms(l.E2EMaxms), commas(l.E2ESlow),
				ms(l.HandoverP50ms), ms(l.HandoverP99ms), ms(l.HandoverP999ms), ms(l.HandoverMaxms), commas(l.HandoverSlow),
				ms(l.RelayP99ms), ms(l.RelayP999ms),
				bytesIEC(l.LagStartBytes), bytesIEC(l.LagEndBytes), bytesIEC(l.LagMaxBytes), l.TailSeconds,
				l.RelayCPUMicrosPerEvent, l.WalsenderCPUMicrosPerEvent, l.PostgresCPUMicrosPerEvent, l.OtherCPUSec, heldText(l))
		}
		fmt.Fprintln(w)
		for _, l := range r.Latency {
			if (l.Held || l.TargetRate == goalLatencyRate) && len(l.PerSecond) > 0 {
				writePerSecond(w, l)
			}
		}
		if r.HighestRateHeld > 0 {
			fmt.Fprintf(w, "Highest rate held without growing lag: %s events/s (of those tried).\n\n", commas(r.HighestRateHeld))
		} else {
			fmt.Fprintln(w, "No rate tried was held without growing lag.")
			fmt.Fprintln(w)
		}
	}

	if len(r.Modes) > 0 {
		fmt.Fprintf(w, "### Modes: backlog of %s events drained once each\n\n", commas(r.Settings.ModeEvents))
		fmt.Fprintln(w, "| --mode | --on-publish | seconds | events/s | relay CPU µs/event | PostgreSQL CPU µs/event | relay WAL / insert WAL | removal of old rows | peak RSS | machine busy | others' CPU s | read back (distinct) |")
		fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|")
		for _, x := range r.Modes {
			name := x.OnPublish
			if x.Default {
				name += " (default)"
			}
			if x.Skipped != "" {
				fmt.Fprintf(w, "| %s | %s | skipped: %s |||||||||||\n", x.Mode, name, x.Skipped)
				continue
			}
			removal := "-"
			if x.WAL.RemovalChecked {
				removal = removalSentence(x.WAL)
			}
			fmt.Fprintf(w, "| %s | %s | %.2f | %s | %.1f | %.1f | %s | %s | %s | %.0f%% | %.1f | %s (%s) |\n", x.Mode, name, x.Seconds,
				commas(int(math.Round(x.EventsPerSec))), x.CPUMicrosPerEvent, x.PostgresCPUSec/float64(x.Events)*1e6,
				pct(x.WAL.RelayShare()), removal, bytesIEC(x.PeakRSSBytes), x.MachineBusy*100, x.OtherCPUSec, commas(x.ReadBack), commas(x.Distinct))
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "WAL: the inserts wrote %s per event; the relay's WAL is counted from its start to %s after the slot confirmed the last transaction "+
			"(poll mode: after the last event settled); removal of old rows is the WAL after that until the table is empty (at most -removal-wait).\n\n",
			bytesIEC(r.Modes[firstMeasured(r.Modes)].WAL.InsertBytes/int64(max(r.Settings.ModeEvents, 1))), walAfterConfirm)
	}
	if len(r.Pgoutput) > 0 {
		writePgoutput(w, r)
	}
	writeDatabases(w, r)
	writeConverters(w, r)
	if r.Error != "" {
		fmt.Fprintf(w, "**Incomplete run:** %s\n\n", r.Error)
	}
}

func pct(v float64) string { return fmt.Sprintf("%.0f%%", v*100) }

// removalSentence describes the removal of old rows after a drain.
func removalSentence(w walAccount) string {
	if w.RowsLeft == 0 {
		return fmt.Sprintf("%s WAL, table empty after %.1fs", bytesIEC(w.RemovalBytes), w.RemovalSeconds)
	}
	return fmt.Sprintf("%s rows left after %.0fs (%s WAL)", commas(int(w.RowsLeft)), w.RemovalSeconds, bytesIEC(w.RemovalBytes))
}

// firstMeasured is the index of the first mode run that was not skipped, 0 if none.
func firstMeasured(modes []modeResult) int {
	for i, m := range modes {
		if m.Skipped == "" {
			return i
		}
	}
	return 0
}

// heldText says whether a load step was held, and if not why.
func heldText(l latencyResult) string {
	if l.Held {
		return "yes"
	}
	var why []string
	if l.AchievedRate < 0.95*float64(l.TargetRate) {
		why = append(why, "generator short of the rate")
	}
	if l.LagGrew {
		why = append(why, "lag grew")
	}
	if l.Missing > 0 {
		why = append(why, fmt.Sprintf("%d not consumed", l.Missing))
	}
	return "no (" + strings.Join(why, ", ") + ")"
}

// writePerSecond prints a step's tail by the second its events committed in (for the
// held steps and the goals' rate; the JSON has every step's).
func writePerSecond(w io.Writer, l latencyResult) {
	fmt.Fprintf(w, "Tail per second at %s events/s (by the second of the load each insert committed in):\n\n", commas(l.TargetRate))
	fmt.Fprintln(w, "| second | events | commit→consume p99 ms | max ms | over 10 ms | created→hand-over max ms | over 10 ms |")
	fmt.Fprintln(w, "|--:|--:|--:|--:|--:|--:|--:|")
	for _, t := range l.PerSecond {
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s |\n", t.Second, commas(t.Count), ms(t.P99ms), ms(t.Maxms),
			commas(t.Slow), ms(t.HandoverMaxms), commas(t.HandoverSlow))
	}
	fmt.Fprintln(w)
}

var progressStart = time.Now()
var progressMu sync.Mutex

// progress prints a timestamped line on stderr; stdout carries only the tables.
func progress(format string, args ...any) {
	progressMu.Lock()
	defer progressMu.Unlock()
	d := time.Since(progressStart).Round(time.Second)
	fmt.Fprintf(os.Stderr, "[%02d:%02d] %s\n", int(d.Minutes()), int(d.Seconds())%60, fmt.Sprintf(format, args...))
}

func rate(n int, d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return commas(int(float64(n)/d.Seconds())) + " events/s"
}

func ms(v jsonFloat) string {
	f := float64(v)
	switch {
	case math.IsNaN(f):
		return "-"
	case math.IsInf(f, 1):
		return "∞"
	case f >= 100:
		return fmt.Sprintf("%.0f", f)
	case f >= 10:
		return fmt.Sprintf("%.1f", f)
	}
	return fmt.Sprintf("%.2f", f)
}

func bytesIEC(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

func commas(n int) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// joinInts writes ns as a flag value: "100,1000".
func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
