package http_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/relay"
	httpsink "github.com/walrelay/walrelay/sink/http"
)

const (
	benchAggregates = 200
	benchPayload    = 200 // bytes of padding in each payload
)

// counter is an endpoint that answers 204 at once and counts the requests.
func counter(b *testing.B) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		n.Add(1)
		w.WriteHeader(nethttp.StatusNoContent)
	}))
	b.Cleanup(srv.Close)
	return srv, &n
}

// BenchmarkDrain compares the relay draining b.N streamed events, signed, into a
// local endpoint that answers at once with that endpoint's own ceiling: a client
// POSTing the same number of bodies of the same size from as many goroutines as
// the sink has requests under way (make bench: -benchtime 20000x).
func BenchmarkDrain(b *testing.B) {
	b.Run("relay", benchRelayDrain)
	b.Run("ceiling", benchCeiling)
}

// benchRelayDrain streams b.N committed events: a first relay run creates the slot,
// the backlog is committed while no relay runs, and a second run, timed from its
// start to the last request answered, streams it.
func benchRelayDrain(b *testing.B) {
	srv, n := counter(b)
	b.Setenv("WALRELAY_BENCH_SECRET", secret(1))
	dbURL := testenv.MigratedDatabase(b)
	conn := testenv.Connect(b, dbURL)
	slot := fmt.Sprintf("bench_http_%d", b.N)
	run := func() (stop func()) {
		cfg := config(srv.URL + "/hooks/{aggregate_type}")
		cfg.SigningSecrets = []string{"env:WALRELAY_BENCH_SECRET"}
		snk := newSink(b, cfg)
		stopRelay := testenv.RunRelay(b, dbURL, slot, snk, &testenv.LogBuffer{}, func(c *relay.Config) {
			c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		})
		return func() { stopRelay(); snk.Close() }
	}
	stop := run()
	if !testenv.Eventually(time.Minute, func() bool { return testenv.SlotLSN(b, conn, slot) != 0 }) {
		b.Fatal("the relay created no slot")
	}
	stop()
	if _, err := conn.Exec(context.Background(), `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
		SELECT 'order', 'agg-' || (g % $2), 'order.created', jsonb_build_object('seq', g, 'pad', repeat('x', $3))
		FROM generate_series(1, $1) g`, b.N, benchAggregates, benchPayload); err != nil {
		b.Fatal(err)
	}
	n.Store(0)
	b.ResetTimer()
	stop = run()
	if !testenv.Eventually(5*time.Minute, func() bool { return n.Load() >= int64(b.N) }) {
		b.Fatalf("answered %d of %d", n.Load(), b.N)
	}
	b.StopTimer()
	stop()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// benchCeiling POSTs b.N bodies like the sink's straight to the endpoint.
func benchCeiling(b *testing.B) {
	srv, n := counter(b)
	client := &nethttp.Client{Transport: &nethttp.Transport{MaxConnsPerHost: httpsink.DefaultMaxConnections,
		MaxIdleConnsPerHost: httpsink.DefaultMaxConnections}}
	body := []byte(`{"seq": 1, "pad": "` + strings.Repeat("x", benchPayload) + `"}`)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range httpsink.DefaultMaxConnections {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				resp, err := client.Post(srv.URL+"/hooks/order", "application/json", bytes.NewReader(body))
				if err != nil {
					b.Errorf("post: %v", err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if got := n.Load(); got != int64(b.N) {
		b.Fatalf("answered %d of %d", got, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
