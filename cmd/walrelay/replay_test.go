package main_test

import (
	"strings"
	"testing"
	"time"

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
