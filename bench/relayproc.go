package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// relayRun is how one walrelay process is configured.
type relayRun struct {
	dbURL         string
	slot          string
	topicTemplate string
	mode          string   // stream or poll
	onPublish     string   // --on-publish; "" the binary's default
	args          []string // more `walrelay run` flags for this run only
}

// relayProc is a running `walrelay run`.
type relayProc struct {
	*proc
	metricsURL string
	readyURL   string
	baseURL    string
}

// startRelay runs the relay binary with its defaults except for what the run sets,
// and metrics on a free loopback port.
func (e *env) startRelay(run relayRun, label string) (*relayProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	e.runs++
	logPath := filepath.Join(e.work, fmt.Sprintf("walrelay-%02d-%s.log", e.runs, label))
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	args := append([]string{"run"}, e.opts.relayArgs...)
	args = append(args,
		"--database-url", run.dbURL,
		"--kafka-brokers", e.brokerAt,
		"--slot", run.slot,
		"--topic-template", run.topicTemplate,
		"--mode", run.mode,
		"--metrics-addr", addr,
		"--log-format", "json",
	)
	if run.onPublish != "" {
		args = append(args, "--on-publish", run.onPublish)
	}
	args = append(args, run.args...)
	p, err := startProc("walrelay "+label, logPath, nil, e.walrelay, args...)
	if err != nil {
		return nil, err
	}
	return &relayProc{proc: p, metricsURL: "http://" + addr + "/metrics", readyURL: "http://" + addr + "/readyz", baseURL: "http://" + addr}, nil
}

// failed describes a relay that exited when it should not have.
func (r *relayProc) failed() error {
	return fmt.Errorf("%s exited early (%v); log tail:\n%s", r.name, r.err, tailFile(r.logPath, 15))
}

// waitReady polls /readyz until the relay streams (or polls).
func (r *relayProc) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if r.exited() {
			return r.failed()
		}
		if resp, err := client.Get(r.readyURL); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %s; log tail:\n%s", r.name, timeout, tailFile(r.logPath, 15))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// scrape reads the relay's /metrics.
func (r *relayProc) scrape(ctx context.Context) (samples, error) { return scrape(ctx, r.metricsURL) }

// primeSlot starts the relay until it streams, so that it creates the slot and
// finishes its catch-up bookkeeping, and stops it gracefully.
func (e *env) primeSlot(ctx context.Context, run relayRun) error {
	rp, err := e.startRelay(run, "prime-"+run.slot)
	if err != nil {
		return err
	}
	if err := rp.waitReady(ctx, time.Minute); err != nil {
		_ = rp.stop(10 * time.Second)
		return err
	}
	return rp.stop(30 * time.Second)
}

// trace writes a Go runtime trace of the relay of d to path.
func (r *relayProc) trace(ctx context.Context, path string, d time.Duration) error {
	return r.pprof(ctx, "trace", path, d)
}

// profile writes a CPU profile of the relay of d to path.
func (r *relayProc) profile(ctx context.Context, path string, d time.Duration) error {
	return r.pprof(ctx, "profile", path, d)
}

// pprof fetches one of the relay's --pprof handlers for d into path.
func (r *relayProc) pprof(ctx context.Context, handler, path string, d time.Duration) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/%s?seconds=%g", r.baseURL, handler, d.Seconds()), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetch %s: %w", handler, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetch %s: %s (is --pprof on?)", handler, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
