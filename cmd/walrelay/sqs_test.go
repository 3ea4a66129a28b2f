package main_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/internal/testenv/sqsserver"
	"github.com/walrelay/walrelay/outbox"
)

// sqsEnv configures `walrelay run --sink sqs` for srv: static credentials in the
// environment and no AWS files or instance metadata, so the chain looks no further.
func sqsEnv(dbURL string, srv *sqsserver.Server, extra ...string) []string {
	return relayEnv(dbURL, nil, append([]string{
		"WALRELAY_SINK=sqs",
		"WALRELAY_TOPIC_TEMPLATE=outbox-{aggregate_type}.fifo",
		"WALRELAY_SQS_ENDPOINT=" + srv.URL,
		"WALRELAY_SQS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=AKIDTEST", "AWS_SECRET_ACCESS_KEY=secret",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true",
	}, extra...)...)
}

// SIGKILL the relay three times while it streams 12,000 events into a FIFO queue:
// every event is stored, once (the queue drops the repeats a restart sends, by
// their deduplication id, the event id), in commit order per aggregate. A long
// status interval makes sure each kill leaves acknowledged events unconfirmed, so
// that the restarted relay does send repeats.
func TestSQSCrashLosesNothing(t *testing.T) {
	t.Parallel()
	srv := sqsserver.Start(t, sqsserver.Options{})
	const queue = "outbox-order.fifo"
	srv.CreateQueue(queue, 0)
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	writer := testenv.Connect(t, dbURL)
	slot := slotName(t, "")
	env := sqsEnv(dbURL, srv, "WALRELAY_SLOT="+slot, "WALRELAY_STATUS_INTERVAL=2s", "WALRELAY_KEEPALIVE_INTERVAL=2s")

	relay := startProc(t, "relay", env, "run")
	waitStreaming(t, conn, slot, relay)
	aggs := make([]string, 40)
	for i := range aggs {
		aggs[i] = fmt.Sprintf("crash-%02d", i)
	}
	var written []outbox.Event
	for kill := 0; kill < 3; kill++ {
		for range 10 {
			written = append(written, testenv.WriteTx(t, writer, aggs, "crash", 300, false)...)
		}
		want := len(written) - 300
		if !poll(time.Minute, func() bool { return srv.Count(queue) >= want }) {
			t.Fatalf("before kill %d: %d of %d stored", kill+1, srv.Count(queue), want)
		}
		relay.signal(syscall.SIGKILL)
		relay.wait(10 * time.Second)
		relay = startProc(t, fmt.Sprintf("relay after kill %d", kill+1), env, "run")
		waitStreaming(t, conn, slot, relay)
	}
	for range 10 {
		written = append(written, testenv.WriteTx(t, writer, aggs, "crash.last", 300, false)...)
	}
	// Anything sent again would be in by now: the marker comes after it.
	written = append(written, testenv.WriteTx(t, writer, []string{"marker"}, "marker", 1, false)...)
	if !poll(2*time.Minute, func() bool { return srv.Count(queue) >= len(written) }) {
		t.Fatalf("stored %d of %d", srv.Count(queue), len(written))
	}
	relay.stop(10 * time.Second)

	ids := make([]string, len(written))
	for i, e := range written {
		ids[i] = e.ID
	}
	if err := srv.CheckDelivery(queue, ids); err != nil {
		t.Fatal(err)
	}
	sent := 0
	for _, r := range srv.Requests() {
		for _, e := range r.Entries {
			sent++
			if e.DedupID != e.Attributes["id"] || e.GroupID != e.Attributes["aggregate_id"] {
				t.Fatalf("entry with deduplication id %q and group %q for event %s of aggregate %s: want the event id and the aggregate id",
					e.DedupID, e.GroupID, e.Attributes["id"], e.Attributes["aggregate_id"])
			}
		}
	}
	repeats := srv.Deduplicated(queue)
	t.Logf("%d events written, %d entries sent, %d repeats dropped by the queue's deduplication, 3 SIGKILLs", len(written), sent, repeats)
	if repeats == 0 {
		t.Error("no repeats after three kills: the kills did not land between acknowledgement and confirmation, so deduplication went untested")
	}
}
