package redis_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/redis"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// testRedis is the test's view of its server (testenv.Redis, or the explicit
// WALRELAY_TEST_REDIS_URL): its URL, a client and the test's key prefix, which keeps
// a shared server usable too.
type testRedis struct {
	t      *testing.T
	url    string
	client *goredis.Client
	prefix string // of every stream the test writes
}

// addr is host:port of the test's server, for a proxy in front of it.
func (r *testRedis) addr() string {
	opts, err := goredis.ParseURL(r.url)
	if err != nil {
		r.t.Fatalf("%s: %v", r.url, err)
	}
	return opts.Addr
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// newTestRedis starts the test's Redis and connects to it. Every key under the
// test's prefix, streams and dedup keys, is deleted at the end.
func newTestRedis(t *testing.T) *testRedis {
	t.Helper()
	url := testenv.Redis(t)
	opts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	client := goredis.NewClient(opts)
	t.Cleanup(func() { client.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		t.Fatalf("integration tests need Redis at %s: %v", url, err)
	}
	// Glob-safe, so the prefix can be a SCAN pattern as it is.
	prefix := fmt.Sprintf("walrelay-test:%s-%08x:", unsafeChars.ReplaceAllString(t.Name(), "_"), rand.Uint32())
	r := &testRedis{t: t, url: url, client: client, prefix: prefix}
	t.Cleanup(r.deleteKeys)
	return r
}

func (r *testRedis) deleteKeys() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, pattern := range []string{r.prefix + "*", redis.DedupKeyPrefix + r.prefix + "*"} {
		iter := r.client.Scan(ctx, 0, pattern, 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
			if len(keys) == 500 {
				r.client.Unlink(ctx, keys...)
				keys = keys[:0]
			}
		}
		if err := iter.Err(); err != nil {
			r.t.Errorf("scan %s: %v", pattern, err)
		}
		if len(keys) > 0 {
			r.client.Unlink(ctx, keys...)
		}
	}
}

// config is a sink config writing to the test's streams, one per aggregate type.
func (r *testRedis) config() redis.Config {
	cfg := redis.DefaultConfig()
	cfg.URL = r.url
	cfg.StreamTemplate = r.prefix + "{aggregate_type}"
	return cfg
}

// newSink creates a sink closed at the end of the test.
func newSink(t *testing.T, cfg redis.Config) *redis.Sink {
	t.Helper()
	s, err := redis.New(cfg)
	if err != nil {
		t.Fatalf("redis.New: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// entry is one stream entry as a consumer sees it.
type entry struct {
	ID     string // the stream entry id
	Fields map[string]string
}

// read returns every entry of the stream.
func (r *testRedis) read(stream string) []entry {
	r.t.Helper()
	msgs, err := r.client.XRange(context.Background(), stream, "-", "+").Result()
	if err != nil {
		r.t.Fatalf("xrange %s: %v", stream, err)
	}
	out := make([]entry, len(msgs))
	for i, m := range msgs {
		out[i] = entry{ID: m.ID, Fields: map[string]string{}}
		for k, v := range m.Values {
			out[i].Fields[k], _ = v.(string)
		}
	}
	return out
}

// xlen is the stream's length.
func (r *testRedis) xlen(stream string) int64 {
	r.t.Helper()
	n, err := r.client.XLen(context.Background(), stream).Result()
	if err != nil {
		r.t.Fatalf("xlen %s: %v", stream, err)
	}
	return n
}

var waitFor = testenv.Eventually

// outcomes records done calls per published event.
type outcomes struct {
	mu    sync.Mutex
	calls map[*outbox.Event][]error
	n     int
}

func newOutcomes() *outcomes { return &outcomes{calls: map[*outbox.Event][]error{}} }

// publish hands e to s, recording its outcome.
func (o *outcomes) publish(s *redis.Sink, e *outbox.Event) {
	s.Publish(e, sink.DoneFunc(func(err error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.calls[e] = append(o.calls[e], err)
		o.n++
	}))
}

// count is the number of done calls so far.
func (o *outcomes) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n
}

// of returns the errors done was called with for e.
func (o *outcomes) of(e *outbox.Event) []error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]error(nil), o.calls[e]...)
}

// event makes a distinct event of the aggregate type.
func event(aggregateType, aggregateID string, n int) *outbox.Event {
	return &outbox.Event{
		ID:            fmt.Sprintf("%08x-0000-4000-8000-%012x", rand.Uint32(), n),
		AggregateType: aggregateType,
		AggregateID:   aggregateID,
		EventType:     "thing.happened",
		Payload:       fmt.Appendf(nil, `{"n": %d}`, n),
		CreatedAt:     time.Now().UTC(),
	}
}
