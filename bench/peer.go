package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A peer is another outbox relay, measured on the same backlog as walrelay and
// pg_recvlogical when -peer-cmd is given. The command runs under sh -c with these
// variables set, and must publish every row of the table to the topic:
//
//	PEER_DATABASE_URL  the database (postgres:// URL)
//	PEER_KAFKA_BROKERS host:port of the broker
//	PEER_SLOT          a pgoutput slot created where the backlog starts (a peer that
//	                   creates its slot when it is missing uses it as it is)
//	PEER_PUBLICATION   walrelay's publication of the table (publish = 'insert')
//	PEER_TABLE         the outbox table (public.outbox_events)
//	PEER_TOPIC         where the records must arrive
//
// It is timed from its start until the harness has consumed every record from the
// topic, and stopped with SIGTERM then.
const peerSlot = "bench_peer"

// peerResult is the peer relay draining the backlog.
type peerResult struct {
	Events         int     `json:"events"`
	Seconds        float64 `json:"seconds"` // start to the last record consumed
	EventsPerSec   float64 `json:"events_per_sec"`
	CPUSeconds     float64 `json:"peer_cpu_seconds"` // its process tree
	PostgresCPUSec float64 `json:"postgres_cpu_seconds"`
	MachineBusy    float64 `json:"machine_busy_fraction"`
}

// drainPeer runs -peer-cmd on the backlog of n events and waits for n records on
// topic.
func (e *env) drainPeer(ctx context.Context, conn *pgx.Conn, dbURL, topic string, n int) (peerResult, error) {
	res := peerResult{Events: n}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokerAt), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		return res, fmt.Errorf("kafka consumer: %w", err)
	}
	defer cl.Close()
	machine := readMachineCPU()
	pg0 := e.postgresCPU()
	e.runs++
	env := []string{"PEER_DATABASE_URL=" + dbURL, "PEER_KAFKA_BROKERS=" + e.brokerAt, "PEER_SLOT=" + peerSlot,
		"PEER_PUBLICATION=walrelay", "PEER_TABLE=public.outbox_events", "PEER_TOPIC=" + topic}
	p, err := startProcEnv("peer", filepath.Join(e.work, fmt.Sprintf("peer-%02d.log", e.runs)), env, "/bin/sh", "-c", e.opts.peerCmd)
	if err != nil {
		return res, err
	}
	defer p.stop(30 * time.Second)
	deadline := p.started.Add(e.opts.drainTimeout)
	got, lastReport := 0, time.Now()
	for got < n {
		if p.exited() {
			return res, fmt.Errorf("peer exited after %d of %d records (%v); log tail:\n%s", got, n, p.err, tailFile(p.logPath, 15))
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("peer: %d of %d records within %s (-drain-timeout); log: %s", got, n, e.opts.drainTimeout, p.logPath)
		}
		pollCtx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		got += cl.PollFetches(pollCtx).NumRecords()
		cancel()
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if time.Since(lastReport) > 5*time.Second {
			progress("  peer: %d/%d records (%s)", got, n, rate(got, time.Since(p.started)))
			lastReport = time.Now()
		}
	}
	res.Seconds = time.Since(p.started).Seconds()
	res.EventsPerSec = float64(n) / res.Seconds
	res.CPUSeconds = treeCPU(p.pid())
	res.PostgresCPUSec = e.postgresCPU() - pg0
	res.MachineBusy = machine.busySince()
	_ = syscall.Kill(-p.pid(), syscall.SIGTERM) // the command's whole process group, not only sh
	if err := p.stop(30 * time.Second); err != nil && !strings.Contains(err.Error(), "signal: terminated") {
		progress("  peer stop: %v", err)
	}
	return res, nil
}

// startProcEnv is startProc with variables added to the harness's environment.
func startProcEnv(name, logPath string, env []string, path string, args ...string) (*proc, error) {
	return startProcWith(name, logPath, nil, append(os.Environ(), env...), path, args...)
}
