package relay_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/kafka"
)

// countingSink passes events to a real sink and keeps count of the publishes it has
// not answered yet. The maxima are taken at every Publish, not sampled, so a single
// moment over the window's bound is caught.
type countingSink struct {
	sink.Sink

	mu                   sync.Mutex
	events, bytes        int64 // outstanding now
	maxEvents, maxBytes  int64 // outstanding at most
	maxSize, acked, sent int64
}

func (c *countingSink) Publish(e *outbox.Event, done sink.Done) {
	size := int64(e.Size())
	c.mu.Lock()
	c.events++
	c.bytes += size
	c.sent++
	c.maxEvents, c.maxBytes, c.maxSize = max(c.maxEvents, c.events), max(c.maxBytes, c.bytes), max(c.maxSize, size)
	c.mu.Unlock()
	c.Sink.Publish(e, sink.DoneFunc(func(err error) {
		c.mu.Lock()
		c.events--
		c.bytes -= size
		if err == nil {
			c.acked++
		}
		c.mu.Unlock()
		done.Done(err)
	}))
}

// snapshot returns the outstanding publishes now and the largest numbers so far.
func (c *countingSink) snapshot() (events, bytes, maxEvents, maxBytes, maxSize, acked int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.events, c.bytes, c.maxEvents, c.maxBytes, c.maxSize, c.acked
}

// The in-flight window holds what it is configured to, measured: while the broker
// refuses every write, the publishes outstanding at the sink (and the relay's own
// walrelay_inflight_* gauges) climb to MaxInFlightEvents, or to MaxInFlightBytes
// plus at most the one event that crossed it, and never past that, before or after
// the broker recovers and everything is delivered.
func TestWindowBoundsPublishesInFlight(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		maxEvents int
		maxBytes  int64
	}{
		{"events", 25, 64 << 20},
		{"bytes", 10000, 2000}, // ~20 events of ~100 bytes
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbURL := testenv.MigratedDatabase(t)
			broker := testenv.Kafka(t)
			conn := testenv.Connect(t, dbURL)
			ks, err := kafka.New(kafka.Config{Brokers: broker.ListenAddrs(), TopicTemplate: kafka.DefaultTopicTemplate,
				MaxBufferedEvents: 100000, MaxBufferedBytes: 64 << 20})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(ks.Close)
			counting := &countingSink{Sink: ks}
			reg := prometheus.NewRegistry()

			fault := broker.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotEnoughReplicas, Count: -1})
			startWithBrokers(t, dbURL, nil, "window_"+tc.name, func(c *config) {
				c.Sink = counting
				c.Registry = reg
				c.MaxInFlightEvents, c.MaxInFlightBytes = tc.maxEvents, tc.maxBytes
			})
			var written []outbox.Event
			for range 5 {
				written = append(written, testenv.WriteTx(t, conn, aggregates("wb", 10), "held", 20, false)...)
			}

			// The window fills: reading stops at the bound with events still unread.
			full := func() bool {
				events, bytes, _, _, _, _ := counting.snapshot()
				if tc.name == "events" {
					return events >= int64(tc.maxEvents)
				}
				return bytes >= tc.maxBytes
			}
			waitFor(t, time.Minute, "the window to fill", full)
			// Let the relay run against the full window for more refused writes (each
			// a retry by the Kafka client, backing off), so a reader ignoring it would show.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := fault.Wait(ctx, fault.Hits()+2); err != nil {
				t.Fatalf("broker stopped seeing writes: %v", err)
			}
			events, bytes, _, _, maxSize, acked := counting.snapshot()
			if acked != 0 {
				t.Fatalf("%d events acked while the broker refused writes", acked)
			}
			if int(events) >= len(written) {
				t.Fatalf("all %d events outstanding at once: the window did not stop reading", events)
			}
			gEvents, gBytes := gaugeValue(t, reg, "walrelay_inflight_events"), gaugeValue(t, reg, "walrelay_inflight_bytes")
			if gEvents < float64(events) || gBytes < float64(bytes) {
				t.Errorf("walrelay_inflight_events %v, _bytes %v: below the %d events, %d bytes outstanding at the sink", gEvents, gBytes, events, bytes)
			}
			checkBound(t, "while full", tc.maxEvents, tc.maxBytes, maxSize, int64(gEvents), int64(gBytes))

			fault.Remove()
			waitFor(t, time.Minute, "every event acked", func() bool {
				_, _, _, _, _, acked := counting.snapshot()
				return acked >= int64(len(written))
			})
			_, _, maxEvents, maxBytes, maxSize, _ := counting.snapshot()
			checkBound(t, "outstanding at the sink", tc.maxEvents, tc.maxBytes, maxSize, maxEvents, maxBytes)
			t.Logf("at most %d events, %d bytes outstanding (bounds %d events, %d bytes; largest event %d bytes)",
				maxEvents, maxBytes, tc.maxEvents, tc.maxBytes, maxSize)
		})
	}
}

// checkBound fails the test when events or bytes passed the window's bounds. The
// window admits an event while below both bounds, so bytes may end above
// MaxInFlightBytes by less than the event that crossed it, never by more.
func checkBound(t *testing.T, what string, maxEvents int, maxBytes, largestEvent, events, bytes int64) {
	t.Helper()
	if events > int64(maxEvents) {
		t.Errorf("%s: %d events in flight, over MaxInFlightEvents %d", what, events, maxEvents)
	}
	if bytes >= maxBytes+largestEvent {
		t.Errorf("%s: %d bytes in flight, over MaxInFlightBytes %d plus one event of at most %d bytes", what, bytes, maxBytes, largestEvent)
	}
}

// gaugeValue reads one registered gauge.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	return testutil.ToFloat64(gauge(t, reg, name))
}
