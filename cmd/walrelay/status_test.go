package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
)

// statusReport is the part of `walrelay status --json` these tests read.
type statusReport struct {
	OK         bool   `json:"ok"`
	ExitCode   int    `json:"exit_code"`
	Slot       string `json:"slot"`
	SlotExists bool   `json:"slot_exists"`
	SlotActive bool   `json:"slot_active"`
	Pending    int64  `json:"pending_rows"`
	Relay      *struct {
		Reachable         bool       `json:"reachable"`
		Ready             bool       `json:"ready"`
		Answer            string     `json:"answer"`
		EventsConfirmedAt *time.Time `json:"events_confirmed_at"`
	} `json:"relay"`
	Problems []struct {
		Check   string `json:"check"`
		Message string `json:"message"`
	} `json:"problems"`
}

func (r statusReport) has(check string) bool {
	for _, p := range r.Problems {
		if p.Check == check {
			return true
		}
	}
	return false
}

// status runs `walrelay status --json` and returns its report; the exit code must be
// the one the report names.
func status(t *testing.T, env []string, args ...string) statusReport {
	t.Helper()
	res := run(t, 30*time.Second, env, append([]string{"status", "--json"}, args...)...)
	var rep statusReport
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("status --json is not JSON (exit %d): %v\n%s%s", res.code, err, res.stdout, res.stderr)
	}
	if res.code != rep.ExitCode || rep.OK != (res.code == 0) {
		t.Fatalf("status exited %d, its report says exit_code %d, ok %v", res.code, rep.ExitCode, rep.OK)
	}
	return rep
}

// waitStatus runs status until its exit code is code, and returns that report.
func waitStatus(t *testing.T, timeout time.Duration, code int, env []string, args ...string) statusReport {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		rep := status(t, env, args...)
		if rep.ExitCode == code {
			return rep
		}
		if time.Now().After(deadline) {
			t.Fatalf("status did not exit %d within %s; last report: %+v", code, timeout, rep)
		}
		time.Sleep(200 * time.Millisecond) // pacing the polls: each one is a process and a connection
	}
}

// outboxEnv is a migrated database of the test's own, a broker, a connection, a slot
// name and the environment that runs a relay on them.
type outboxEnv struct {
	dbURL string
	kafka *kfake.Cluster
	conn  *pgx.Conn
	slot  string
	env   []string
}

func newOutboxEnv(t *testing.T, extra ...string) outboxEnv {
	t.Helper()
	o := outboxEnv{dbURL: testenv.MigratedDatabase(t), kafka: testenv.Kafka(t), slot: slotName(t, "")}
	o.conn = testenv.Connect(t, o.dbURL)
	o.env = relayEnv(o.dbURL, o.kafka.ListenAddrs(), append([]string{"WALRELAY_SLOT=" + o.slot}, extra...)...)
	return o
}

// startRelay runs `walrelay run` with o.env until it streams the slot.
func (o outboxEnv) startRelay(t *testing.T) *proc {
	t.Helper()
	p := startProc(t, "relay", o.env, "run")
	waitStreaming(t, o.conn, o.slot, p)
	return p
}

// Without a relay: a slot that does not exist yet, then one no process streams while a
// row waits, is "no relay streams the slot" (exit 4), and the row past the bound is
// in the report too.
func TestStatusWithoutRelay(t *testing.T) {
	t.Parallel()
	o := newOutboxEnv(t)
	env, slot := o.env, o.slot

	rep := status(t, env)
	if rep.ExitCode != 4 || rep.SlotExists || !rep.has("not_streamed") {
		t.Fatalf("status before any relay ran: %+v, want exit 4 for a slot that does not exist", rep)
	}
	o.startRelay(t).stop(10 * time.Second)

	testenv.WriteTx(t, o.conn, []string{"nr"}, "waiting", 1, false)
	rep = waitStatus(t, 30*time.Second, 4, env, "--max-pending-age", "1s")
	if !rep.SlotExists || rep.SlotActive || rep.Pending != 1 {
		t.Fatalf("status with the relay stopped: %+v, want the slot there, not streamed, one row pending", rep)
	}
	if !poll(10*time.Second, func() bool { return status(t, env, "--max-pending-age", "1s").has("pending") }) {
		t.Fatal("a row pending for over 1s is not reported")
	}
	res := run(t, 30*time.Second, env, "status")
	if res.code != 4 || !strings.Contains(res.stdout, "problem (not_streamed): no process streams slot "+slot) {
		t.Fatalf("status (text): exit %d\n%s", res.code, res.stdout)
	}
}

// A relay that cannot reach the broker when it starts holds no slot: a row waits and
// status says no relay streams it (exit 4). Asked at its address, the relay itself
// says it is not ready (exit 6).
func TestStatusBrokerUnreachableAtStart(t *testing.T) {
	t.Parallel()
	o := newOutboxEnv(t)
	env := o.env
	o.startRelay(t).stop(10 * time.Second) // creates the slot

	admin := testenv.FreeAddr(t)
	down := newTripwire(t) // accepts and closes: no broker there
	relay := startProc(t, "relay without broker",
		relayEnv(o.dbURL, []string{down.addr}, "WALRELAY_SLOT="+o.slot, "WALRELAY_METRICS_ADDR="+admin), "run")
	testenv.WriteTx(t, o.conn, []string{"nb"}, "waiting", 1, false)
	if !poll(30*time.Second, func() bool { return strings.Contains(relay.output.String(), "broker unreachable") }) {
		t.Fatal("the relay did not report the broker unreachable")
	}
	rep := waitStatus(t, 30*time.Second, 4, env, "--max-pending-age", "1s")
	if rep.SlotActive || rep.Pending != 1 {
		t.Fatalf("status: %+v, want the slot not streamed and the row pending", rep)
	}
	rep = waitStatus(t, 30*time.Second, 6, env, "--admin-url", "http://"+admin)
	if rep.Relay == nil || !rep.Relay.Reachable || rep.Relay.Ready || rep.Relay.Answer == "" || !rep.has("not_streamed") {
		t.Fatalf("status asking the relay: %+v, want it reachable, not ready with its reason, and the slot not streamed", rep)
	}
}

// A relay whose broker stops acknowledging: the row it holds waits past the bound
// (exit 5) while the slot stays streamed, and once its stall detector fires the
// relay says so (exit 6). When the broker acknowledges again every row is delivered
// and status is 0.
func TestStatusStalledRelay(t *testing.T) {
	t.Parallel()
	admin := testenv.FreeAddr(t)
	o := newOutboxEnv(t, "WALRELAY_METRICS_ADDR="+admin, "WALRELAY_STALL_TIMEOUT=1s", "WALRELAY_STATS_INTERVAL=100ms")
	env := o.env
	relay := o.startRelay(t)
	consumer := testenv.NewConsumer(t, o.kafka.ListenAddrs(), `outbox\.event\..*`)

	fault := o.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotEnoughReplicas, Count: -1})
	written := len(testenv.WriteTx(t, o.conn, []string{"st"}, "stuck", 3, false))
	if err := fault.Wait(context.Background(), 1); err != nil {
		t.Fatalf("broker never refused a write: %v", err)
	}
	// Not asking the relay: its stall detector may fire any time now (the shared
	// cluster's WAL grows the lag), and this is about the rows.
	rep := waitStatus(t, 30*time.Second, 5, append(env, "WALRELAY_METRICS_ADDR="), "--max-pending-age", "2s")
	if !rep.SlotActive || rep.Pending != int64(written) {
		t.Fatalf("status while the broker refuses: %+v, want the slot streamed and %d rows pending", rep, written)
	}

	// The stall detector needs the lag to grow: WAL from another table.
	execSQL(t, o.dbURL, "CREATE TABLE busy (pad text)")
	stopWriting := testenv.KeepWriting(o.conn, "INSERT INTO busy SELECT repeat('x', 1000) FROM generate_series(1, 100)")
	rep = waitStatus(t, 30*time.Second, 6, env, "--max-pending-age", "2s")
	stopWriting()
	if rep.Relay == nil || rep.Relay.Ready || !rep.has("pending") {
		t.Fatalf("status of a stalled relay: %+v, want it not ready and the rows pending", rep)
	}

	fault.Remove()
	if !consumer.WaitDistinct(time.Minute, written) {
		t.Fatalf("after the broker recovered: %d of %d delivered", consumer.Distinct(), written)
	}
	waitStatus(t, time.Minute, 0, env)
	relay.stop(10 * time.Second)
}

// A healthy relay: status exits 0 and says when events were last confirmed; the
// relay logs one start-up line naming what it runs (no password), serves its build as
// walrelay_build_info, and warns of a WALRELAY_* variable it does not know.
func TestStatusHealthyRelay(t *testing.T) {
	t.Parallel()
	admin := testenv.FreeAddr(t)
	const password = "st4rtup-pw" // trust authentication: any password is accepted
	o := newOutboxEnv(t, "WALRELAY_METRICS_ADDR="+admin, "WALRELAY_PUBLICATON=typo")
	o.env = append(o.env, "WALRELAY_DATABASE_URL="+strings.Replace(o.dbURL, "postgres@", "postgres:"+password+"@", 1))
	env, slot, kafka := o.env, o.slot, o.kafka
	relay := o.startRelay(t)
	consumer := testenv.NewConsumer(t, kafka.ListenAddrs(), `outbox\.event\..*`)
	if !consumer.WaitDistinct(time.Minute, len(testenv.WriteTx(t, o.conn, []string{"ok"}, "fine", 2, false))) {
		t.Fatal("events not delivered")
	}
	var rep statusReport
	if !poll(30*time.Second, func() bool {
		rep = status(t, env)
		return rep.ExitCode == 0 && rep.Relay != nil && rep.Relay.EventsConfirmedAt != nil
	}) {
		t.Fatalf("status of a healthy relay: %+v, want exit 0 with the time events were last confirmed", rep)
	}
	if !rep.Relay.Ready || !rep.SlotActive || rep.Relay.Answer == "" {
		t.Errorf("status: %+v, want the relay ready, with its answer, and the slot streamed", rep)
	}
	res := run(t, 30*time.Second, env, "status")
	if res.code != 0 || !strings.Contains(res.stdout, "status: OK") || !strings.Contains(res.stdout, "events last confirmed") {
		t.Errorf("status (text): exit %d\n%s", res.code, res.stdout)
	}
	if !strings.Contains(res.stderr, "WALRELAY_PUBLICATON is not a walrelay setting and is ignored; did you mean WALRELAY_PUBLICATION?") {
		t.Errorf("status does not warn of WALRELAY_PUBLICATON:\n%s", res.stderr)
	}

	out := relay.output.String()
	startup := regexp.MustCompile(`(?m)^.*msg="walrelay starting".*$`).FindAllString(out, -1)
	if len(startup) != 1 {
		t.Fatalf("%d start-up lines, want 1:\n%s", len(startup), out)
	}
	for _, want := range []string{"version=", "mode=stream", "on_publish=progress", "delivery=at-least-once", "sink=kafka",
		"brokers=[" + kafka.ListenAddrs()[0] + "]", `database_url="postgres://postgres:xxxxx@127.0.0.1:`, "slot=" + slot, "publication=walrelay",
		"tables=[outbox_events]"} {
		if !strings.Contains(startup[0], want) {
			t.Errorf("start-up line lacks %q: %s", want, startup[0])
		}
	}
	if !strings.Contains(out, "WALRELAY_PUBLICATON is not a walrelay setting") {
		t.Errorf("the relay does not warn of WALRELAY_PUBLICATON:\n%s", out)
	}
	if strings.Contains(out, password) {
		t.Errorf("the relay's output contains the database password:\n%s", out)
	}
	metrics := httpGet(t, "http://"+admin+"/metrics")
	if !regexp.MustCompile(`(?m)^walrelay_build_info\{goversion="go[^"]+",revision="[^"]*",version="[^"]+"\} 1$`).MatchString(metrics) {
		t.Errorf("/metrics has no walrelay_build_info:\n%s", grepLines(metrics, "build_info"))
	}
	relay.stop(10 * time.Second)
}

// `walrelay version` and `--version` say what the Go toolchain stamped into the
// binary: the module version, and the VCS revision when the build had one.
func TestVersion(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(goTool(t), "version", "-m", binary(t)).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m: %v\n%s", err, out)
	}
	mod := regexp.MustCompile(`(?m)^\s+mod\s+github.com/walrelay/walrelay\s+(\S+)`).FindStringSubmatch(string(out))
	if mod == nil {
		t.Fatalf("go version -m shows no module version:\n%s", out)
	}
	want := "walrelay " + mod[1]
	if rev := regexp.MustCompile(`(?m)^\s+build\s+vcs.revision=(\S+)`).FindStringSubmatch(string(out)); rev != nil {
		want += " (revision " + rev[1]
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		res := run(t, 10*time.Second, baseEnv(), args...)
		if res.code != 0 || !strings.HasPrefix(res.stdout, want) || !strings.Contains(res.stdout, " go1.") {
			t.Errorf("walrelay %s: exit %d, %q; want it to start with %q and name the Go version", args[0], res.code, res.stdout, want)
		}
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func grepLines(text, word string) string {
	var b strings.Builder
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, word) {
			fmt.Fprintln(&b, l)
		}
	}
	return b.String()
}

// A replication client that stops sending status updates but keeps its connection
// (its walsender's own timeout off, as a long one would be) leaves the slot active
// with a live walsender: status says streamed while the client answers, and no
// longer (exit 4, naming the silence) once its last status update is older than the
// database's wal_sender_timeout, with the walsender still there.
func TestStatusStreamedWhileClientSilent(t *testing.T) {
	t.Parallel()
	const timeout = 2 * time.Second
	o := newOutboxEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var db string
	if err := o.conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	execSQL(t, o.dbURL, fmt.Sprintf("ALTER DATABASE %s SET wal_sender_timeout = '%dms'", pgx.Identifier{db}.Sanitize(), timeout.Milliseconds()))

	rc, err := pgconn.Connect(ctx, testenv.WithParams(o.dbURL, map[string]string{
		"replication": "database", "options": "-cwal_sender_timeout=0"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close(context.Background()) })
	created, err := pglogrepl.CreateReplicationSlot(ctx, rc, o.slot, "pgoutput", pglogrepl.CreateReplicationSlotOptions{Temporary: true})
	if err != nil {
		t.Fatal(err)
	}
	lsn, err := pglogrepl.ParseLSN(created.ConsistentPoint)
	if err != nil {
		t.Fatal(err)
	}
	if err := pglogrepl.StartReplication(ctx, rc, o.slot, lsn, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names 'walrelay'"},
	}); err != nil {
		t.Fatal(err)
	}
	// Status updates every 200ms, as a relay sends them, until silenced.
	silence, silenced := make(chan struct{}), make(chan error, 1)
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			if err := pglogrepl.SendStandbyStatusUpdate(ctx, rc, pglogrepl.StandbyStatusUpdate{WALWritePosition: lsn}); err != nil {
				silenced <- err
				return
			}
			select {
			case <-tick.C:
			case <-silence:
				silenced <- nil
				return
			}
		}
	}()
	rep := waitStatus(t, 30*time.Second, 0, o.env)
	if !rep.SlotActive {
		t.Fatalf("status while the client answers: %+v, want the slot streamed", rep)
	}

	close(silence)
	if err := <-silenced; err != nil {
		t.Fatalf("send a status update: %v", err)
	}
	quiet := time.Now()
	rep = waitStatus(t, 30*time.Second, 4, o.env)
	if took := time.Since(quiet); took < timeout-200*time.Millisecond {
		t.Errorf("status said not streamed %s after the last status update, before wal_sender_timeout (%s)", took, timeout)
	}
	if rep.SlotActive || !rep.has("not_streamed") || !strings.Contains(rep.Problems[0].Message, "has not heard from its client") {
		t.Fatalf("status of a silent client: %+v, want the slot not streamed, naming the silence", rep)
	}
	var alive bool
	if err := o.conn.QueryRow(ctx, `SELECT s.active AND EXISTS (SELECT 1 FROM pg_stat_replication r WHERE r.pid = s.active_pid)
		FROM pg_replication_slots s WHERE s.slot_name = $1`, o.slot).Scan(&alive); err != nil || !alive {
		t.Fatalf("the silent client's walsender is gone (%v): the server ended it, the rule was not tested", err)
	}
}
