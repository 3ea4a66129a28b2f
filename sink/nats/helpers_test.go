package nats_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
	natssink "github.com/walrelay/walrelay/sink/nats"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// fixture is a NATS server of the test's own (testenv.NATS, or the explicit
// WALRELAY_TEST_NATS_ADDR) with a stream name and subject prefix of the test's own,
// so that a shared server also works; the stream is deleted when the test ends.
type fixture struct {
	addr   string
	stream string
	prefix string
	nc     *nats.Conn
	js     jetstream.JetStream
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	natsURL := testenv.NATS(t)
	addr := strings.TrimPrefix(natsURL, "nats://")
	nc, err := nats.Connect(natsURL, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("connect to NATS at %s: %v", addr, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Fatalf("JetStream at %s: %v", addr, err)
	}
	suffix := randomHex(4)
	f := &fixture{
		addr:   addr,
		stream: "WRTEST_" + unsafeName.ReplaceAllString(t.Name(), "_") + "_" + suffix,
		prefix: "wrtest." + strings.ToLower(unsafeName.ReplaceAllString(t.Name(), "_")) + "_" + suffix,
		nc:     nc,
		js:     js,
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, f.stream)
	})
	return f
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// config is the sink's configuration for the fixture: its stream, created by the
// sink, capturing <prefix>.>.
func (f *fixture) config() natssink.Config {
	cfg := natssink.DefaultConfig()
	cfg.URL = "nats://" + f.addr
	cfg.Stream = f.stream
	cfg.SubjectTemplate = f.prefix + ".{aggregate_type}"
	cfg.CreateStream = true
	return cfg
}

func newSink(t *testing.T, cfg natssink.Config) *natssink.Sink {
	t.Helper()
	s, err := natssink.New(cfg)
	if err != nil {
		t.Fatalf("natssink.New: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// count is the number of messages in the stream (0 while it does not exist).
func (f *fixture) count(t *testing.T) uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := f.js.Stream(ctx, f.stream)
	if err != nil {
		return 0
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Errorf("stream info: %v", err)
		return 0
	}
	return info.State.Msgs
}

// waitCount polls until the stream holds at least n messages.
func (f *fixture) waitCount(t *testing.T, n int, timeout time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for f.count(t) < uint64(n) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
	return true
}

// messages reads the whole stream in sequence order.
func (f *fixture) messages(t *testing.T) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := f.js.Stream(ctx, f.stream)
	if err != nil {
		t.Fatalf("stream %s: %v", f.stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	msgs := make([]*jetstream.RawStreamMsg, 0, info.State.Msgs)
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("get message %d: %v", seq, err)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// collector gathers done outcomes.
type collector struct {
	mu      sync.Mutex
	results map[string][]error
	n       int
}

func newCollector() *collector { return &collector{results: map[string][]error{}} }

func (c *collector) done(id string) sink.Done {
	return sink.DoneFunc(func(err error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.results[id] = append(c.results[id], err)
		c.n++
	})
}

// wait polls until n outcomes arrived.
func (c *collector) wait(t *testing.T, n int, timeout time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c.mu.Lock()
		got := c.n
		c.mu.Unlock()
		if got >= n {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
}

func (c *collector) get(id string) []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.results[id]...)
}

// logBuffer collects logs; printed when a test fails.
type logBuffer = testenv.LogBuffer

// startRelay runs a relay with the sink until the returned stop is called (or the
// test ends).
func startRelay(t *testing.T, dbURL string, snk sink.Sink) (stop func()) {
	t.Helper()
	return testenv.RunRelay(t, dbURL, "nats_"+randomHex(6), snk, &logBuffer{})
}

func aggregates(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + "-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
	}
	return out
}

// checkStream asserts that the stream holds every written event exactly once, with
// the documented subject, headers and data, in commit order per aggregate.
func (f *fixture) checkStream(t *testing.T, written []outbox.Event) {
	t.Helper()
	msgs := f.messages(t)
	byID := map[string]outbox.Event{}
	pos := map[string]int{}
	for i, ev := range written {
		byID[ev.ID] = ev
		pos[ev.ID] = i
	}
	seen := map[string]int{}
	last := map[string]int{} // per aggregate: commit position of the last message seen
	for _, m := range msgs {
		id := m.Header.Get("id")
		seen[id]++
		ev, ok := byID[id]
		if !ok {
			t.Errorf("stream seq %d: unknown event id %q", m.Sequence, id)
			continue
		}
		if seen[id] > 1 {
			continue
		}
		if got := m.Header.Get(jetstream.MsgIDHeader); got != id {
			t.Errorf("event %s: Nats-Msg-Id %q", id, got)
		}
		if want := f.prefix + "." + ev.AggregateType; m.Subject != want {
			t.Errorf("event %s: subject %q, want %q", id, m.Subject, want)
		}
		for key, want := range map[string]string{"event_type": ev.EventType, "aggregate_type": ev.AggregateType, "aggregate_id": ev.AggregateID} {
			if got := m.Header.Get(key); got != want {
				t.Errorf("event %s: header %s = %q, want %q", id, key, got, want)
			}
		}
		createdAt, err := time.Parse(time.RFC3339Nano, m.Header.Get("created_at"))
		if err != nil || !createdAt.Equal(ev.CreatedAt) {
			t.Errorf("event %s: created_at %q (%v), want %s", id, m.Header.Get("created_at"), err, ev.CreatedAt)
		}
		var got, want any
		if err := json.Unmarshal(m.Data, &got); err != nil {
			t.Errorf("event %s: data is not JSON: %v", id, err)
		}
		_ = json.Unmarshal(ev.Payload, &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("event %s: data %s, want %s", id, m.Data, ev.Payload)
		}
		if prev, ok := last[ev.AggregateID]; ok && pos[id] < prev {
			t.Errorf("aggregate %s: event %s (commit position %d) stored after position %d", ev.AggregateID, id, pos[id], prev)
		}
		last[ev.AggregateID] = pos[id]
	}
	missing, dups := 0, 0
	for _, ev := range written {
		switch n := seen[ev.ID]; {
		case n == 0:
			missing++
		case n > 1:
			dups += n - 1
		}
	}
	if missing > 0 || dups > 0 || len(msgs) != len(written) {
		t.Errorf("stream holds %d messages for %d events: %d events missing, %d duplicates", len(msgs), len(written), missing, dups)
	}
}
