package redis_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink/redis"
)

// logBuffer collects logs; printed when a test fails.
type logBuffer = testenv.LogBuffer

// startRelay runs a relay streaming dbURL into snk until the test ends.
func startRelay(t *testing.T, dbURL, slot string, snk *redis.Sink, logs *logBuffer) {
	t.Helper()
	testenv.RunRelay(t, dbURL, slot, snk, logs)
}

func aggregates(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

// checkStream asserts that the stream holds every written event exactly once, with
// its fields, in commit order per aggregate, plus the marker last.
func checkStream(t *testing.T, r *testRedis, stream string, written []outbox.Event, marker outbox.Event) {
	t.Helper()
	entries := r.read(stream)
	seq := map[string]int{}
	byID := map[string]outbox.Event{}
	for i, ev := range written {
		seq[ev.ID] = i
		byID[ev.ID] = ev
	}
	seen := map[string]int{}
	lastSeq := map[string]int{}
	for _, en := range entries {
		id := en.Fields["id"]
		seen[id]++
		if id == marker.ID {
			continue
		}
		ev, ok := byID[id]
		if !ok {
			t.Fatalf("unknown event id %q in the stream", id)
		}
		for key, want := range map[string]string{"event_type": ev.EventType, "aggregate_type": ev.AggregateType, "aggregate_id": ev.AggregateID} {
			if got := en.Fields[key]; got != want {
				t.Errorf("event %s: field %s = %q, want %q", id, key, got, want)
			}
		}
		var gotPayload, wantPayload any
		if err := json.Unmarshal([]byte(en.Fields["payload"]), &gotPayload); err != nil {
			t.Fatalf("event %s: payload is not JSON: %v", id, err)
		}
		_ = json.Unmarshal(ev.Payload, &wantPayload)
		if !reflect.DeepEqual(gotPayload, wantPayload) {
			t.Errorf("event %s: payload %s, want %s", id, en.Fields["payload"], ev.Payload)
		}
		createdAt, err := time.Parse(time.RFC3339Nano, en.Fields["created_at"])
		if err != nil || !createdAt.Equal(ev.CreatedAt) {
			t.Errorf("event %s: created_at %q (%v), want %s", id, en.Fields["created_at"], err, ev.CreatedAt)
		}
		if prev, ok := lastSeq[ev.AggregateID]; ok && seq[id] < prev {
			t.Errorf("aggregate %s: event %s (commit position %d) after position %d", ev.AggregateID, id, seq[id], prev)
		}
		lastSeq[ev.AggregateID] = seq[id]
	}
	for _, ev := range written {
		if n := seen[ev.ID]; n != 1 {
			t.Errorf("event %s is in the stream %d times, want 1", ev.ID, n)
		}
	}
	if seen[marker.ID] != 1 || entries[len(entries)-1].Fields["id"] != marker.ID {
		t.Errorf("marker %s not the last entry", marker.ID)
	}
	if got, want := len(entries), len(written)+1; got != want {
		t.Errorf("stream holds %d entries, want %d (each event once, plus the marker)", got, want)
	}
}

// waitMarker writes a marker event after everything else and waits until the stream
// has it: every earlier event has had its chance to arrive (or arrive twice).
func waitMarker(t *testing.T, r *testRedis, stream string, write func() outbox.Event, want int) outbox.Event {
	t.Helper()
	marker := write()
	if !waitFor(30*time.Second, func() bool {
		entries := r.read(stream)
		return len(entries) > 0 && entries[len(entries)-1].Fields["id"] == marker.ID
	}) {
		t.Fatalf("marker not delivered; stream holds %d of %d entries", r.xlen(stream), want+1)
	}
	return marker
}

// Through the relay, about 2,000 events of many aggregates arrive once each, with
// their fields, in commit order per aggregate.
func TestRelayEndToEnd(t *testing.T) {
	t.Parallel()
	r := newTestRedis(t)
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	snk := newSink(t, r.config())
	logs := &logBuffer{}
	startRelay(t, dbURL, "redis_e2e", snk, logs)

	aggs := aggregates("e2e", 97)
	var written []outbox.Event
	sizes := []int{1, 50, 120, 7, 200, 33, 1, 88}
	for i := 0; len(written) < 2000; i++ {
		written = append(written, testenv.WriteTx(t, conn, aggs[i%len(aggs):], "order.updated", sizes[i%len(sizes)], false)...)
	}
	stream := r.prefix + "order"
	if !waitFor(time.Minute, func() bool { return r.xlen(stream) >= int64(len(written)) }) {
		t.Fatalf("stream holds %d of %d events", r.xlen(stream), len(written))
	}
	marker := waitMarker(t, r, stream, func() outbox.Event {
		return testenv.WriteTx(t, conn, []string{"marker"}, "marker", 1, false)[0]
	}, len(written))
	checkStream(t, r, stream, written, marker)
}

// Redis unreachable for a few seconds while the application keeps committing: once
// it is back every event is in the stream, none twice, in order per aggregate.
func TestRelayRedisOutage(t *testing.T) {
	t.Parallel()
	r := newTestRedis(t)
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	writer := testenv.Connect(t, dbURL)
	proxy := testenv.NewProxy(t, r.addr())
	cfg := r.config()
	cfg.URL = "redis://" + proxy.Addr() + "/0"
	logs := &logBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	snk := newSink(t, cfg)
	startRelay(t, dbURL, "redis_outage", snk, logs)
	stream := r.prefix + "order"

	aggs := aggregates("out", 41)
	const txs, perTx = 80, 25
	writtenCh := make(chan []outbox.Event, 1)
	progress := make(chan int, txs)
	go func() {
		var evs []outbox.Event
		for i := range txs {
			evs = append(evs, testenv.WriteTx(t, writer, aggs[i%len(aggs):], "order.updated", perTx, false)...)
			progress <- i
			time.Sleep(50 * time.Millisecond) // pacing the load, so it spans the outage
		}
		writtenCh <- evs
	}()

	// Cut Redis off once events flow, while the writer is still committing.
	if !waitFor(30*time.Second, func() bool { return r.xlen(stream) >= 5*perTx }) {
		t.Fatalf("no events delivered before the outage (%d)", r.xlen(stream))
	}
	proxy.Down()
	before := len(progress)
	// The outage lasts until the sink has failed to write and the writer has
	// committed meanwhile: on a busy machine the stream may bring nothing for seconds.
	if !waitFor(30*time.Second, func() bool {
		return len(progress) > before && strings.Contains(logs.String(), "redis unavailable")
	}) {
		t.Fatalf("within 30s of the outage the writer committed %d transactions and the sink saw no failure",
			len(progress)-before)
	}
	during := r.xlen(stream)
	proxy.Up()
	t.Logf("outage: %d entries in the stream when it ended", during)

	written := <-writtenCh
	if !waitFor(time.Minute, func() bool { return r.xlen(stream) >= int64(len(written)) }) {
		t.Fatalf("stream holds %d of %d events after the outage", r.xlen(stream), len(written))
	}
	marker := waitMarker(t, r, stream, func() outbox.Event {
		return testenv.WriteTx(t, conn, []string{"marker"}, "marker", 1, false)[0]
	}, len(written))
	checkStream(t, r, stream, written, marker)
	if int(during) >= len(written) {
		t.Errorf("the outage missed the load: %d of %d events were in the stream before redis came back", during, len(written))
	}
}
