package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// databasesResult is one relay process streaming Databases databases of a file's
// databases list with no writes: what each more database costs to stand by.
type databasesResult struct {
	Databases      int     `json:"databases"`
	Seconds        float64 `json:"seconds"`
	RelayCPUms     float64 `json:"relay_cpu_ms"`
	RelayCPUmsPerS float64 `json:"relay_cpu_ms_per_second"`
	RSSKiB         int64   `json:"rss_kib"`
	MachineBusy    float64 `json:"machine_busy_fraction"`
}

// idleDatabaseCounts are the databases scenario's process sizes.
var idleDatabaseCounts = []int{1, 4, 8}

// runDatabases runs the relay with a databases list of each size in turn, each
// database with a slot of its own, waits until every database streams, and reads
// the relay's CPU over d with no writes.
func (e *env) runDatabases(ctx context.Context, d time.Duration) ([]databasesResult, error) {
	most := idleDatabaseCounts[len(idleDatabaseCounts)-1]
	urls := make([]string, most)
	for i := range urls {
		url, err := e.createDatabase(ctx, fmt.Sprintf("bench_multi_%02d", i))
		if err != nil {
			return nil, err
		}
		urls[i] = url
	}
	var out []databasesResult
	for _, n := range idleDatabaseCounts {
		res, err := e.idleDatabases(ctx, urls[:n], d)
		if err != nil {
			return out, fmt.Errorf("%d databases: %w", n, err)
		}
		out = append(out, res)
	}
	return out, nil
}

// idleDatabases is one step of runDatabases: one relay process on urls.
func (e *env) idleDatabases(ctx context.Context, urls []string, d time.Duration) (databasesResult, error) {
	res := databasesResult{Databases: len(urls), Seconds: d.Seconds()}
	port, err := freePort()
	if err != nil {
		return res, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	var file strings.Builder
	fmt.Fprintf(&file, "kafka-brokers: %s\nmetrics-addr: %s\nlog-format: json\ndatabases:\n", e.brokerAt, addr)
	slots := make([]string, len(urls))
	for i, url := range urls {
		slots[i] = fmt.Sprintf("bench_multi_%d_%02d", len(urls), i)
		fmt.Fprintf(&file, "  - name: db%02d\n    database-url: %s\n    slot: %s\n    topic-template: bench.multi.{aggregate_type}\n", i, url, slots[i])
	}
	e.runs++
	config := filepath.Join(e.work, fmt.Sprintf("walrelay-%02d-databases-%d.yaml", e.runs, len(urls)))
	if err := os.WriteFile(config, []byte(file.String()), 0o600); err != nil {
		return res, err
	}
	logPath := strings.TrimSuffix(config, ".yaml") + ".log"
	p, err := startProc(fmt.Sprintf("walrelay %d databases", len(urls)), logPath, nil, e.walrelay,
		append(append([]string{"run"}, e.opts.relayArgs...), "--config", config)...)
	if err != nil {
		return res, err
	}
	rp := &relayProc{proc: p, metricsURL: "http://" + addr + "/metrics", readyURL: "http://" + addr + "/readyz", baseURL: "http://" + addr}
	defer func() { _ = rp.stop(30 * time.Second) }()
	if err := rp.waitReady(ctx, time.Minute); err != nil { // every database streams (relay.Group's /readyz)
		return res, err
	}
	for _, url := range urls {
		if err := waitSlotStreamed(ctx, url, slots); err != nil {
			return res, err
		}
	}
	cpu0, _ := cpuSeconds(rp.pid())
	machine := readMachineCPU()
	path := ""
	if e.opts.relayProfile != "" {
		path = filepath.Join(e.opts.relayProfile, fmt.Sprintf("relay-idle-%d-databases.pprof", len(urls)))
	}
	if _, err := standIdle(ctx, rp, path, d); err != nil {
		return res, err
	}
	cpu1, _ := cpuSeconds(rp.pid())
	res.RelayCPUms = (cpu1 - cpu0) * 1e3
	res.RelayCPUmsPerS = res.RelayCPUms / d.Seconds()
	res.MachineBusy = machine.busySince()
	res.RSSKiB, _ = statusKB(rp.pid(), "VmRSS")
	progress("  %d database(s) idle %s: relay CPU %.0f ms (%.2f ms/s), RSS %s, machine %.0f%% busy",
		len(urls), d, res.RelayCPUms, res.RelayCPUmsPerS, bytesIEC(res.RSSKiB<<10), res.MachineBusy*100)
	if err := rp.stop(30 * time.Second); err != nil {
		return res, err
	}
	for _, url := range urls {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return res, err
		}
		for _, slot := range slots {
			err = dropSlot(ctx, conn, slot)
		}
		conn.Close(context.Background())
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// waitSlotStreamed waits until the one of slots that lives in url's database has
// a walsender streaming it.
func waitSlotStreamed(ctx context.Context, url string, slots []string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for deadline := time.Now().Add(time.Minute); ; {
		var active bool
		err := conn.QueryRow(ctx, `SELECT coalesce(bool_and(active), false) FROM pg_replication_slots
			WHERE database = current_database() AND slot_name = ANY($1)`, slots).Scan(&active)
		if err != nil {
			return err
		}
		if active {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the slot of %s is not streamed after a minute", url)
		}
		if err := pause(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// writeDatabases is the databases scenario's table: CPU per second idle by the
// number of databases in one process, and what each database past the first adds.
func writeDatabases(w io.Writer, r *results) {
	if len(r.Databases) == 0 {
		return
	}
	fmt.Fprintf(w, "### Several databases in one process, idle (%gs each, no writes)\n\n", r.Databases[0].Seconds)
	fmt.Fprintln(w, "| databases | relay CPU ms/s | per database past the first, ms/s | RSS | machine busy |")
	fmt.Fprintln(w, "|--:|--:|--:|--:|--:|")
	first := r.Databases[0]
	for _, x := range r.Databases {
		extra := "-"
		if x.Databases > first.Databases {
			extra = fmt.Sprintf("%.3f", (x.RelayCPUmsPerS-first.RelayCPUmsPerS)/float64(x.Databases-first.Databases))
		}
		fmt.Fprintf(w, "| %d | %.2f | %s | %s | %.0f%% |\n", x.Databases, x.RelayCPUmsPerS, extra, bytesIEC(x.RSSKiB<<10), x.MachineBusy*100)
	}
	fmt.Fprintln(w)
}
