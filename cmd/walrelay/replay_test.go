package main_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
)

// `walrelay replay` counts with --dry-run, publishes what its filters select with a
// replay header and plain progress lines off a terminal, and refuses with
// --on-publish delete before it publishes anything.
func TestReplayCommand(t *testing.T) {
	t.Parallel()
	o := newOutboxEnv(t)
	evs := testenv.WriteTx(t, o.conn, []string{"r-1"}, "order.replayed", 5, false)
	testenv.WriteTx(t, o.conn, []string{"r-2"}, "order.other", 2, false)
	consumer := testenv.NewConsumer(t, o.kafka.ListenAddrs(), `outbox\.event\..*`)

	res := run(t, time.Minute, o.env, "replay", "--dry-run", "--event-type", "order.replayed")
	if res.code != 0 || !strings.Contains(res.stdout, "would replay 5 event(s)") {
		t.Fatalf("replay --dry-run: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = run(t, time.Minute, o.env, "replay", "--on-publish", "delete", "--aggregate-id", "r-1")
	if res.code != 1 || !strings.Contains(res.stderr, "cannot replay: with --on-publish delete") {
		t.Fatalf("replay with --on-publish delete: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = run(t, time.Minute, o.env, "replay", "--aggregate-id", "r-1", "--since", "1h", "--rate", "1000")
	if res.code != 0 || !strings.Contains(res.stdout, "replayed 5 event(s) of 5") || !strings.Contains(res.stderr, "5 of 5 events (100%)") {
		t.Fatalf("replay: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if !consumer.WaitDistinct(time.Minute, len(evs)) {
		t.Fatalf("consumed %d of %d replayed events", consumer.Distinct(), len(evs))
	}
	for _, r := range consumer.Records {
		if testenv.Header(r, "walrelay_replay") == "" || testenv.Header(r, "aggregate_id") != "r-1" {
			t.Errorf("record %s: headers %v, want a replay of aggregate r-1", testenv.Header(r, "id"), r.Headers)
		}
	}
	if len(consumer.Records) != len(evs) {
		t.Errorf("consumed %d records, want %d", len(consumer.Records), len(evs))
	}
}

// A replay whose events the broker refuses names up to 20 failed ids, writes them all
// to --failed-ids, says the command that replays them, and exits 1; that command
// replays exactly them once the broker takes them. --since takes days, and a --since
// older than --retention replays from the oldest row still kept, saying which.
func TestReplayCommandFailedIDs(t *testing.T) {
	t.Parallel()
	o := newOutboxEnv(t)
	evs := testenv.WriteTx(t, o.conn, []string{"f-1"}, "order.failing", 25, false)
	consumer := testenv.NewConsumer(t, o.kafka.ListenAddrs(), `outbox\.event\..*`)
	fault := o.kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.InvalidRecord, Count: -1})
	file := filepath.Join(t.TempDir(), "failed.txt")
	res := run(t, time.Minute, o.env, "replay", "--aggregate-id", "f-1", "--since", "30d", "--retention", "1h",
		"--failed-ids", file)
	if res.code != 1 || !strings.Contains(res.stderr, "25 event(s) failed: ") || !strings.Contains(res.stderr, ", and 5 more") ||
		!strings.Contains(res.stderr, "replay them with: walrelay replay --id-file "+file) {
		t.Fatalf("replay against a refusing broker: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if !strings.Contains(res.stderr, "is older than --retention 1h0m0s") ||
		!strings.Contains(res.stderr, "replaying from the oldest matching row still kept, created at ") {
		t.Errorf("no note that --since 30d is older than the retention, naming the oldest row kept:\n%s", res.stderr)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	failed := strings.Fields(string(b))
	want := make([]string, len(evs))
	for i, ev := range evs {
		want[i] = ev.ID
	}
	slices.Sort(failed)
	slices.Sort(want)
	if !slices.Equal(failed, want) {
		t.Fatalf("--failed-ids wrote %v, want the 25 replayed ids %v", failed, want)
	}
	fault.Remove()
	res = run(t, time.Minute, o.env, "replay", "--id-file", file)
	if res.code != 0 || !strings.Contains(res.stdout, "replayed 25 event(s) of 25") {
		t.Fatalf("replay --id-file: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if !consumer.WaitDistinct(time.Minute, len(evs)) {
		t.Fatalf("consumed %d of %d replayed events", consumer.Distinct(), len(evs))
	}
}

// A broker that acknowledges nothing is reported within --ack-timeout, while the
// replay waits; once it answers, the replay ends.
func TestReplayCommandReportsSilentBroker(t *testing.T) {
	t.Parallel()
	o := newOutboxEnv(t)
	testenv.WriteTx(t, o.conn, []string{"s-1"}, "order.silent", 3, false)
	silent := make(chan struct{})
	var once sync.Once
	speak := func() { once.Do(func() { close(silent) }) }
	t.Cleanup(speak)
	o.kafka.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		o.kafka.KeepControl()
		o.kafka.SleepControl(func() { <-silent })
		return nil, nil, false
	})
	cmd := exec.Command(binary(t), "replay", "--aggregate-id", "s-1", "--ack-timeout", "1s")
	cmd.Env = o.env
	var stdout bytes.Buffer
	stderr := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	const said = "the broker has acknowledged none of the 3 events in flight"
	if !testenv.Eventually(30*time.Second, func() bool { return strings.Contains(stderr.String(), said) }) {
		_ = cmd.Process.Kill()
		t.Fatalf("no report of the silent broker:\n%s", stderr.String())
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("the silence was reported after %s; --ack-timeout is 1s", took)
	}
	speak()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("replay after the broker answered: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "replayed 3 event(s) of 3") {
		t.Errorf("replay: %s%s", stdout.String(), stderr.String())
	}
}
