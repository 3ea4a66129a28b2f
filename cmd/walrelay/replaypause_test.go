package main_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
)

// `walrelay replay` asks the relay (at its --metrics-addr here) whether it is paused
// and refuses while it is, saying since when and why and how to go on; asked
// without the relay's token it refuses too; --ignore-pause replays; a relay it
// cannot reach it says so of, on one line, and replays. The refused runs publish
// nothing.
func TestReplayCommandRefusesWhileRelayPaused(t *testing.T) {
	t.Parallel()
	admin := testenv.FreeAddr(t)
	o := newOutboxEnv(t, "WALRELAY_METRICS_ADDR="+admin)
	withToken := slices.Concat(o.env, []string{"WALRELAY_ADMIN_TOKEN=replay-token"})
	relay := startProc(t, "relay", withToken, "run")
	waitStreaming(t, o.conn, o.slot, relay)
	evs := testenv.WriteTx(t, o.conn, []string{"rp-1"}, "order.replayed", 5, false)
	consumer := testenv.NewConsumer(t, o.kafka.ListenAddrs(), `outbox\.event\..*`)
	if res := run(t, 30*time.Second, withToken, "pause"); res.code != 0 {
		t.Fatalf("pause: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	res := run(t, time.Minute, withToken, "replay", "--event-type", "order.replayed")
	if res.code != 1 || !strings.Contains(res.stderr, "the relay at http://"+admin+" is paused (since ") ||
		!strings.Contains(res.stderr, "by POST /pause") || !strings.Contains(res.stderr, "walrelay resume") ||
		!strings.Contains(res.stderr, "--ignore-pause") || strings.Contains(res.stdout, "replayed") {
		t.Fatalf("replay against a paused relay: exit %d\n%s%s\nwant exit 1 saying it is paused since when, why, "+
			"and that walrelay resume or --ignore-pause go on", res.code, res.stdout, res.stderr)
	}
	res = run(t, time.Minute, o.env, "replay", "--event-type", "order.replayed")
	if res.code != 1 || !strings.Contains(res.stderr, "401") || !strings.Contains(res.stderr, "--admin-token") {
		t.Fatalf("replay without the relay's token: exit %d\n%s%s\nwant exit 1 naming the token", res.code, res.stdout, res.stderr)
	}

	res = run(t, time.Minute, withToken, "replay", "--ignore-pause", "--event-type", "order.replayed")
	if res.code != 0 || !strings.Contains(res.stdout, "replayed 5 event(s) of 5") {
		t.Fatalf("replay --ignore-pause: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	nobody := testenv.FreeAddr(t) // nothing listens there
	res = run(t, time.Minute, withToken, "replay", "--admin-url", "http://"+nobody, "--event-type", "order.replayed")
	line := "could not ask the relay at http://" + nobody + " whether it is paused: "
	if res.code != 0 || !strings.Contains(res.stdout, "replayed 5 event(s) of 5") || strings.Count(res.stderr, line) != 1 ||
		!strings.Contains(res.stderr, "connection refused; replaying anyway\n") {
		t.Fatalf("replay with the relay unreachable: exit %d\n%s%s\nwant one line %q...; replaying anyway, and the replay",
			res.code, res.stdout, res.stderr, line)
	}

	// Two replays of five, and nothing of the refused ones.
	byReplay := map[string]int{}
	replayed := func() int {
		clear(byReplay)
		n := 0
		for _, r := range consumer.Records {
			if id := testenv.Header(r, "walrelay_replay"); id != "" {
				byReplay[id]++
				n++
			}
		}
		return n
	}
	if !consumer.WaitFor(time.Minute, func() bool { return replayed() >= 2*len(evs) }) {
		t.Fatalf("consumed %d replayed records, want %d", replayed(), 2*len(evs))
	}
	if n := replayed(); n != 2*len(evs) || len(byReplay) != 2 {
		t.Fatalf("consumed %d replayed records of %d replays (%v), want %d of 2", n, len(byReplay), byReplay, 2*len(evs))
	}
	relay.stop(10 * time.Second)
}
