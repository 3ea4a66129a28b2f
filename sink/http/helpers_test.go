package http_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
	httpsink "github.com/walrelay/walrelay/sink/http"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// secret is a Standard Webhooks secret of 32 bytes, n telling them apart.
func secret(n byte) string {
	b := make([]byte, 32)
	for i := range b {
		b[i] = n + byte(i)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

func event(id, aggType, aggID string) *outbox.Event {
	return &outbox.Event{ID: id, AggregateType: aggType, AggregateID: aggID, EventType: aggType + ".changed",
		Payload: []byte(`{"id":"` + id + `"}`), PayloadType: "jsonb", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
}

func newSink(t testing.TB, cfg httpsink.Config) *httpsink.Sink {
	t.Helper()
	s, err := httpsink.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func config(url string) httpsink.Config {
	c := httpsink.DefaultConfig()
	c.URL = url
	return c
}

// outcomes collects each event's done calls.
type outcomes struct {
	mu   sync.Mutex
	errs map[string][]error
	got  chan string
}

func newOutcomes() *outcomes {
	return &outcomes{errs: map[string][]error{}, got: make(chan string, 100000)}
}

func (o *outcomes) done(id string) sink.Done {
	return sink.DoneFunc(func(err error) {
		o.mu.Lock()
		o.errs[id] = append(o.errs[id], err)
		o.mu.Unlock()
		o.got <- id
	})
}

// wait returns id's one outcome once it came, failing after a minute.
func (o *outcomes) wait(t testing.TB, id string) error {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		o.mu.Lock()
		errs := o.errs[id]
		o.mu.Unlock()
		if len(errs) > 1 {
			t.Fatalf("event %s: done called %d times: %v", id, len(errs), errs)
		}
		if len(errs) == 1 {
			return errs[0]
		}
		select {
		case <-o.got:
		case <-deadline:
			t.Fatalf("event %s: no outcome within a minute", id)
		}
	}
}

func flush(t testing.TB, s *httpsink.Sink) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// clock is a settable clock for Config.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return out
}

func errClosed() error { return httpsink.ErrClosed }

func unescapePath(s string) (string, error) { return url.PathUnescape(s) }
