package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rowsPerTx is the backlog's transaction size.
const rowsPerTx = 100

// insertBacklog commits n outbox rows, rowsPerTx per transaction, with server-side
// loops (a DO block commits after each transaction's INSERT ... SELECT
// generate_series), numbering the payloads' seq from first.
func (e *env) insertBacklog(ctx context.Context, conn *pgx.Conn, n, first int) error {
	const txPerCall = 100 // one round trip inserts 10,000 rows
	pad := strings.Repeat("x", max(e.opts.payloadBytes-26, 1))
	began, last := time.Now(), time.Now()
	for done := 0; done < n; {
		rows := min(n-done, txPerCall*rowsPerTx)
		from := first + done
		sql := fmt.Sprintf(`DO $$
BEGIN
  FOR t IN 0..%d LOOP
    INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
    SELECT 'order', 'agg-' || (g %% %d), 'order.created', jsonb_build_object('seq', g, 'pad', '%s')
    FROM generate_series(%d + t*%d, LEAST(%d + (t+1)*%d, %d) - 1) g;
    COMMIT;
  END LOOP;
END $$`, (rows+rowsPerTx-1)/rowsPerTx-1, e.opts.aggregates, pad, from, rowsPerTx, from, rowsPerTx, from+rows)
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("insert backlog: %w", err)
		}
		done += rows
		if time.Since(last) > 5*time.Second || done == n {
			progress("  inserted %d/%d rows (%s)", done, n, rate(done, time.Since(began)))
			last = time.Now()
		}
	}
	return nil
}

// drainResult is one relay process draining a backlog.
type drainResult struct {
	Events            int     `json:"events"`
	Seconds           float64 `json:"seconds"`        // process start to the N-th broker ack
	EventsPerSec      float64 `json:"events_per_sec"` // Events / Seconds
	SettledSeconds    float64 `json:"settled_seconds"`
	CPUSeconds        float64 `json:"relay_cpu_seconds"` // run time (cpuSeconds), start to settled
	CPUMicrosPerEvent float64 `json:"relay_cpu_us_per_event"`
	CPUSecondsAtExit  float64 `json:"relay_cpu_seconds_at_exit"`
	PeakRSSBytes      int64   `json:"relay_peak_rss_bytes"`
	WalsenderCPUSec   float64 `json:"walsender_cpu_seconds,omitempty"`
	BrokerCPUSeconds  float64 `json:"broker_cpu_seconds"`
	PostgresCPUSec    float64 `json:"postgres_cpu_seconds"`  // the whole server, start to settled
	MachineBusy       float64 `json:"machine_busy_fraction"` // all cores, start to settled
	HarnessCPUSec     float64 `json:"harness_cpu_seconds"`
	// OtherCPUSec is busy CPU time that was neither the relay's, PostgreSQL's, the
	// broker's nor the harness's: whatever else runs on the machine.
	OtherCPUSec float64    `json:"other_cpu_seconds"`
	ReadBack    int        `json:"records_read_back"`
	Distinct    int        `json:"distinct_ids_read_back"`
	WAL         walAccount `json:"wal"`
}

// walPlan is what drainRelay needs to count the WAL the relay causes: where the
// backlog's last transaction began (the slot confirms past it once it is published),
// the inserts' own WAL, and whether to wait for old rows to be removed.
type walPlan struct {
	lastTxLSN   int64
	insertBytes int64
	removal     bool
}

// drainRelay starts the relay on a backlog of n events and times it from the process
// start until outbox_events_published_total reaches n, then waits until every event
// is settled (walrelay_inflight_events 0: acked and, in mark or delete mode, its row
// updated), takes the CPU used, and stops the relay gracefully.
func (e *env) drainRelay(ctx context.Context, conn *pgx.Conn, run relayRun, n int, label string, plan walPlan) (drainResult, error) {
	res := drainResult{Events: n}
	res.WAL.InsertBytes = plan.insertBytes
	wal0, err := walPosition(ctx, conn)
	if err != nil {
		return res, err
	}
	machine := readMachineCPU()
	broker0, _ := cpuSeconds(e.broker.pid())
	pg0 := e.postgresCPU()
	self0, _ := cpuSeconds(os.Getpid())
	rp, err := e.startRelay(run, label)
	if err != nil {
		return res, err
	}
	defer rp.stop(30 * time.Second) // on error paths; stopping twice is harmless
	profiled := make(chan struct{})
	if e.opts.relayProfile != "" {
		go func() {
			defer close(profiled)
			path := filepath.Join(e.opts.relayProfile, fmt.Sprintf("relay-profile-%s.pb.gz", label))
			err := rp.waitReady(ctx, time.Minute) // from the start of streaming
			if err == nil {
				err = rp.profile(ctx, path, 3*time.Second)
			}
			if err != nil {
				progress("  relay profile: %v", err)
			} else {
				progress("  relay CPU profile of the first seconds: %s (go tool pprof)", path)
			}
		}()
	} else {
		close(profiled)
	}

	var wsPID int
	var wsCPU float64
	sampleWalsender := func() {
		if run.mode != "stream" {
			return
		}
		if wsPID == 0 {
			wsPID = walsenderPID(ctx, conn, run.slot)
		}
		if wsPID != 0 {
			if c, err := cpuSeconds(wsPID); err == nil {
				wsCPU = c
			}
		}
	}

	deadline := rp.started.Add(e.opts.drainTimeout)
	lastReport, lastSample := time.Now(), time.Time{}
	var published float64
	for {
		if rp.exited() {
			return res, rp.failed()
		}
		if s, err := rp.scrape(ctx); err == nil {
			published = s["outbox_events_published_total"]
		}
		if published >= float64(n) {
			res.Seconds = time.Since(rp.started).Seconds()
			break
		}
		if time.Since(lastSample) > 500*time.Millisecond {
			sampleWalsender()
			lastSample = time.Now()
		}
		if time.Since(lastReport) > 5*time.Second {
			progress("  %s: %.0f/%d events acked (%s)", label, published, n, rate(int(published), time.Since(rp.started)))
			lastReport = time.Now()
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("%s: only %.0f of %d events acked after %s (-drain-timeout); log: %s", label, published, n, e.opts.drainTimeout, rp.logPath)
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(pollDelay(published, float64(n), time.Since(rp.started))):
		}
	}
	res.EventsPerSec = float64(n) / res.Seconds

	for settleDeadline := time.Now().Add(2 * time.Minute); ; {
		s, err := rp.scrape(ctx)
		if err == nil && s["walrelay_inflight_events"] == 0 {
			break
		}
		if time.Now().After(settleDeadline) {
			return res, fmt.Errorf("%s: events still in flight 2 minutes after the last ack; log: %s", label, rp.logPath)
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	res.SettledSeconds = time.Since(rp.started).Seconds()
	if res.CPUSeconds, err = cpuSeconds(rp.pid()); err != nil {
		return res, fmt.Errorf("read relay cpu: %w", err)
	}
	sampleWalsender()
	res.WalsenderCPUSec = wsCPU
	res.MachineBusy = machine.busySince()
	broker1, _ := cpuSeconds(e.broker.pid())
	res.BrokerCPUSeconds = broker1 - broker0
	res.PostgresCPUSec = e.postgresCPU() - pg0
	self1, _ := cpuSeconds(os.Getpid())
	res.HarnessCPUSec = self1 - self0
	res.OtherCPUSec = max(machine.busyCPUSince()-res.CPUSeconds-res.PostgresCPUSec-res.BrokerCPUSeconds-res.HarnessCPUSec, 0)
	res.CPUMicrosPerEvent = res.CPUSeconds / float64(n) * 1e6
	if run.mode == "stream" {
		if err := waitConfirmedPast(ctx, conn, run.slot, plan.lastTxLSN, 2*time.Minute); err != nil {
			return res, fmt.Errorf("%s: %w; log: %s", label, err, rp.logPath)
		}
	}
	if err := pause(ctx, walAfterConfirm); err != nil {
		return res, err
	}
	walEnd, err := walPosition(ctx, conn)
	if err != nil {
		return res, err
	}
	res.WAL.RelayBytes = walEnd - wal0
	if plan.removal {
		res.WAL.RemovalChecked = true
		res.WAL.RemovalBytes, res.WAL.RemovalSeconds, res.WAL.RowsLeft, err = measureRemoval(ctx, conn, walEnd, e.opts.removalWait)
		if err != nil {
			return res, err
		}
	}
	progress("  %s: WAL %s by the inserts, %s by the relay (%.0f%%) to %s after the last confirm%s", label,
		bytesIEC(res.WAL.InsertBytes), bytesIEC(res.WAL.RelayBytes), res.WAL.RelayShare()*100, walAfterConfirm, removalText(res.WAL))
	hwm, err := statusKB(rp.pid(), "VmHWM") // the relay's own peak, since its exec
	if err != nil {
		return res, fmt.Errorf("read relay peak rss: %w", err)
	}

	<-profiled
	if err := rp.stop(30 * time.Second); err != nil {
		return res, fmt.Errorf("graceful stop: %w", err)
	}
	// Not rusage's Maxrss: Linux carries the pre-exec high-water mark into it, and
	// before exec the child shared the harness's memory.
	if ru := rp.rusage(); ru != nil {
		res.CPUSecondsAtExit = tvSeconds(ru.Utime.Sec, ru.Utime.Usec) + tvSeconds(ru.Stime.Sec, ru.Stime.Usec)
	}
	res.PeakRSSBytes = hwm << 10
	return res, nil
}

// pollDelay is the pause before the next scrape of the published counter: a quarter
// of the expected remaining time, within 20ms and 500ms, so that scrapes (each costs
// the relay CPU) are rare during the drain and frequent near its end.
func pollDelay(done, total float64, elapsed time.Duration) time.Duration {
	if done <= 0 {
		return 100 * time.Millisecond
	}
	eta := time.Duration((total - done) / done * float64(elapsed))
	return min(max(eta/4, 20*time.Millisecond), 500*time.Millisecond)
}

// waitGone waits up to timeout for process pid to be reaped (its /proc entry gone).
func waitGone(pid int, timeout time.Duration) {
	if pid == 0 {
		return
	}
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			return
		}
	}
}

func tvSeconds(sec, usec int64) float64 { return float64(sec) + float64(usec)/1e6 }

// recvResult is pg_recvlogical draining the same backlog.
type recvResult struct {
	Events          int     `json:"events"`
	Seconds         float64 `json:"seconds"` // process start to exit at --endpos
	EventsPerSec    float64 `json:"events_per_sec"`
	WalsenderCPUSec float64 `json:"walsender_cpu_seconds"` // last sample, up to 200ms short
	ClientCPUSec    float64 `json:"client_cpu_seconds"`
	PostgresCPUSec  float64 `json:"postgres_cpu_seconds"` // the whole server, start to exit
	MachineBusy     float64 `json:"machine_busy_fraction"`
	OtherCPUSec     float64 `json:"other_cpu_seconds"` // neither PostgreSQL's nor pg_recvlogical's nor the harness's
}

// recvProto1 is pgoutput's options as walrelay starts replication: protocol 1, text
// values, the relay's publication.
var recvProto1 = []string{"proto_version=1"}

// drainRecvlogical streams slot with pg_recvlogical and pgoutput (the relay's
// publication, with the plugin options given) into /dev/null until endLSN.
func (e *env) drainRecvlogical(ctx context.Context, conn *pgx.Conn, db, slot, endLSN string, n int, pluginOpts []string) (recvResult, error) {
	res := recvResult{Events: n}
	machine := readMachineCPU()
	pg0 := e.postgresCPU()
	self0, _ := cpuSeconds(os.Getpid())
	e.runs++
	args := []string{"-h", "127.0.0.1", "-p", fmt.Sprint(e.cluster.Port()), "-U", "postgres", "-d", db,
		"--slot", slot, "--start", "--no-loop", "--endpos", endLSN,
		"-P", "pgoutput", "-o", "publication_names=walrelay", "-f", "/dev/null"}
	for _, o := range pluginOpts {
		args = append(args, "-o", o)
	}
	p, err := startProc("pg_recvlogical", filepath.Join(e.work, fmt.Sprintf("pg_recvlogical-%02d.log", e.runs)), nil, e.recvlog, args...)
	if err != nil {
		return res, err
	}
	defer p.stop(5 * time.Second)
	var wsPID int
	deadline := time.After(e.opts.drainTimeout)
	lastReport := time.Now()
	for !p.exited() {
		if wsPID == 0 {
			wsPID = walsenderPID(ctx, conn, slot)
		}
		if wsPID != 0 {
			if c, err := cpuSeconds(wsPID); err == nil {
				res.WalsenderCPUSec = c
			}
		}
		if time.Since(lastReport) > 5*time.Second {
			progress("  pg_recvlogical: running for %s", time.Since(p.started).Round(time.Second))
			lastReport = time.Now()
		}
		select {
		case <-p.done:
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			return res, fmt.Errorf("pg_recvlogical did not reach %s within %s", endLSN, e.opts.drainTimeout)
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	res.Seconds = time.Since(p.started).Seconds()
	// The walsender's CPU counts once the postmaster has reaped it (its cutime);
	// read the server's before that and a walsender that is exiting may be missed.
	waitGone(wsPID, 2*time.Second)
	res.PostgresCPUSec = e.postgresCPU() - pg0
	res.MachineBusy = machine.busySince()
	busy := machine.busyCPUSince()
	self1, _ := cpuSeconds(os.Getpid())
	if p.err != nil {
		return res, fmt.Errorf("pg_recvlogical: %w: %s", p.err, tailFile(p.logPath, 10))
	}
	res.EventsPerSec = float64(n) / res.Seconds
	if ru := p.rusage(); ru != nil {
		res.ClientCPUSec = tvSeconds(ru.Utime.Sec, ru.Utime.Usec) + tvSeconds(ru.Stime.Sec, ru.Stime.Usec)
	}
	res.OtherCPUSec = max(busy-res.PostgresCPUSec-res.ClientCPUSec-(self1-self0), 0)
	return res, nil
}

// recreateSlot drops slot if it exists and creates it again (pgoutput) at the
// current position.
func recreateSlot(ctx context.Context, conn *pgx.Conn, slot string) error {
	if err := dropSlot(ctx, conn, slot); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", slot); err != nil {
		return fmt.Errorf("create slot %s: %w", slot, err)
	}
	return nil
}

// readBack consumes topic from its start and counts the records and the distinct
// event ids (the id header) until at least expect arrived and a second passes with
// nothing new, or the timeout ends.
func (e *env) readBack(ctx context.Context, topic string, expect int) (records, distinct int, err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokerAt), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return 0, 0, fmt.Errorf("kafka consumer: %w", err)
	}
	defer cl.Close()
	ids := make(map[[16]byte]struct{}, expect)
	began, lastReport := time.Now(), time.Now()
	deadline := began.Add(2*time.Minute + time.Duration(expect/10)*time.Millisecond)
	quietSince := time.Time{}
	for {
		pollCtx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		fetches := cl.PollFetches(pollCtx)
		cancel()
		if ctx.Err() != nil {
			return records, len(ids), ctx.Err()
		}
		got := 0
		fetches.EachRecord(func(r *kgo.Record) {
			got++
			for _, h := range r.Headers {
				if h.Key == "id" {
					var id [16]byte
					if _, err := hex.Decode(id[:], []byte(strings.ReplaceAll(string(h.Value), "-", ""))); err == nil {
						ids[id] = struct{}{}
					}
				}
			}
		})
		records += got
		switch {
		case got > 0:
			quietSince = time.Time{}
		case quietSince.IsZero():
			quietSince = time.Now()
		}
		if records >= expect && !quietSince.IsZero() && time.Since(quietSince) > time.Second {
			return records, len(ids), nil
		}
		if time.Now().After(deadline) {
			return records, len(ids), fmt.Errorf("read back %d of %d records from %s before the deadline", records, expect, topic)
		}
		if time.Since(lastReport) > 5*time.Second {
			progress("  reading back %s: %d/%d records", topic, records, expect)
			lastReport = time.Now()
		}
	}
}

// deleteTopic frees the broker's memory of a topic that was read back.
func (e *env) deleteTopic(ctx context.Context, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokerAt))
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 30000
	req.TopicNames = []string{topic}
	t := kmsg.NewDeleteTopicsRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("delete topic %s: %w", topic, err)
	}
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 {
			return fmt.Errorf("delete topic %s: error code %d", topic, t.ErrorCode)
		}
	}
	return nil
}

// checkReadBack fails when fewer distinct events than expected came back.
func checkReadBack(label string, expect, records, distinct int) error {
	if distinct < expect {
		return fmt.Errorf("%s: read back %d records with %d distinct ids; want %d distinct", label, records, distinct, expect)
	}
	return nil
}
