package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
)

// The fault: a replay over the admin API, of rows large enough to fill the Kafka
// client's buffer while the broker was silent, made the stream's Publish wait in
// franz-go's Produce on the goroutine that reads the WAL and sends status updates.
// The server ended the walsender at wal_sender_timeout, and SIGTERM did not end the
// relay. Now the slot stays active, with the same walsender, for three
// wal_sender_timeouts while small rows keep coming, and SIGTERM ends the relay within
// --shutdown-timeout and a second.
func TestStreamStalledByReplayOnSilentBroker(t *testing.T) {
	t.Parallel()
	for _, delivery := range []string{"at-least-once", "exactly-once"} {
		t.Run(delivery, func(t *testing.T) {
			t.Parallel()
			streamBesideReplayOnSilentBroker(t, delivery)
		})
	}
}

func streamBesideReplayOnSilentBroker(t *testing.T, delivery string) {
	const (
		senderTimeout   = 2 * time.Second
		shutdownTimeout = 3 * time.Second
		rows            = 300
	)
	dbURL := testenv.MigratedDatabase(t)
	kafka := testenv.Kafka(t)
	brokers := kafka.ListenAddrs()
	slot := slotName(t, "")
	conn := testenv.Connect(t, dbURL)
	admin := testenv.FreeAddr(t)
	// The client's buffer is sized from the window: 2 x 4 MiB + 16 MiB, less than the
	// replay's 300 rows of 100 kB.
	env := relayEnv(testenv.WithParams(dbURL, map[string]string{"wal_sender_timeout": senderTimeout.String()}), brokers,
		"WALRELAY_METRICS_ADDR="+admin, "WALRELAY_MAX_INFLIGHT_BYTES=4MiB", "WALRELAY_DELIVERY="+delivery)
	relay := startProc(t, "relay", env, "run", "--slot", slot, "--shutdown-timeout", shutdownTimeout.String())
	waitStreaming(t, conn, slot, relay)
	consumer := testenv.NewConsumer(t, brokers, `outbox\..*`, kgo.FetchIsolationLevel(kgo.ReadCommitted()))

	pad := strings.Repeat("x", 100_000)
	ctx := context.Background()
	for i := range rows {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			ev := outbox.Event{AggregateType: "order", AggregateID: fmt.Sprintf("big-%02d", i%10), EventType: "order.large",
				Payload: fmt.Appendf(nil, `{"i":%d,"pad":%q}`, i, pad)}
			return outbox.Write(ctx, tx, &ev)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !consumer.WaitDistinct(2*time.Minute, rows) {
		t.Fatalf("consumed %d of the %d large rows before the broker fell silent", consumer.Distinct(), rows)
	}

	// The broker stops answering produce requests; closing the cluster at the end
	// wakes them.
	silent := make(chan struct{})
	t.Cleanup(func() { close(silent) })
	kafka.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		kafka.KeepControl()
		kafka.SleepControl(func() { <-silent })
		return nil, nil, false
	})
	resp, err := http.Post("http://"+admin+"/replay", "application/json", strings.NewReader(`{"event_type": "order.large"}`))
	if err != nil {
		t.Fatal(err)
	}
	var started struct{ ID string }
	err = json.NewDecoder(resp.Body).Decode(&started)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || err != nil {
		t.Fatalf("POST /replay: %s (%v), want 202 with the replay's id", resp.Status, err)
	}

	pid := walsender(t, conn, slot)
	if pid == 0 {
		t.Fatalf("slot %s is not active before the replay", slot)
	}
	writer := testenv.Connect(t, dbURL)
	// Small rows keep coming, for three wal_sender_timeouts and a little more; the
	// slot's walsender is sampled all the while, which is the point of the wait.
	until := time.Now().Add(3*senderTimeout + senderTimeout/2)
	small := 0
	for time.Now().Before(until) {
		testenv.WriteTx(t, writer, []string{fmt.Sprintf("small-%d", small%5)}, "order.small", 1, false)
		small++
		if got := walsender(t, conn, slot); got != pid {
			t.Fatalf("after %d small rows the slot's walsender is %d, was %d: the stream stopped sending status updates "+
				"and the server ended it (wal_sender_timeout %s)", small, got, pid, senderTimeout)
		}
		if relay.exited() {
			t.Fatalf("the relay exited while the broker was silent")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The replay was under way against the silent broker all the while.
	resp, err = http.Get("http://" + admin + "/replay/" + started.ID)
	if err != nil {
		t.Fatal(err)
	}
	var progress struct {
		Total, Sent int64
		Done        bool
	}
	err = json.NewDecoder(resp.Body).Decode(&progress)
	resp.Body.Close()
	if err != nil || progress.Total != rows || progress.Sent != 0 || progress.Done {
		t.Fatalf("replay progress %+v (%v), want %d rows to replay, none sent, not done", progress, err, rows)
	}

	began := time.Now()
	relay.signal(syscall.SIGTERM)
	code := relay.wait(shutdownTimeout + time.Second)
	t.Logf("SIGTERM ended the relay in %s with code %d; %d small rows written meanwhile", time.Since(began).Round(time.Millisecond), code, small)
	if code != 0 {
		t.Fatalf("the relay exited with code %d after SIGTERM, want 0", code)
	}
}

// walsender is the pid of the walsender streaming slot (0: the slot is not active).
func walsender(t *testing.T, conn *pgx.Conn, slot string) int32 {
	t.Helper()
	var pid int32
	if err := conn.QueryRow(context.Background(), `SELECT coalesce((SELECT active_pid FROM pg_replication_slots
		WHERE slot_name = $1 AND active), 0)`, slot).Scan(&pid); err != nil {
		t.Fatalf("read slot %s: %v", slot, err)
	}
	return pid
}
