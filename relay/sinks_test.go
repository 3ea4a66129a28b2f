package relay_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	amqp "github.com/rabbitmq/amqp091-go"
	goredis "github.com/redis/go-redis/v9"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/sink/sinks"
)

// Each built-in sink, selected by SinkKind, carries events to its real server: rows
// are marked processed only on the broker's ack, so every row marked and the
// published counter at the number written prove delivery.
func TestBuiltInSinks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind   sinks.Kind
		server func(testing.TB) string // starts the test's own server, returns its URL
	}{{sinks.NATS, testenv.NATS}, {sinks.RabbitMQ, testenv.RabbitMQ}, {sinks.Redis, testenv.Redis}} {
		t.Run(string(tc.kind), func(t *testing.T) {
			t.Parallel()
			brokerURL := tc.server(t)
			dbURL := testenv.MigratedDatabase(t)
			conn := testenv.Connect(t, dbURL)
			suffix := fmt.Sprintf("%s_%d", tc.kind, rand.Int64())
			t.Cleanup(func() { cleanupBroker(t, tc.kind, brokerURL, suffix) })
			reg := prometheus.NewRegistry()
			startWithBrokers(t, dbURL, nil, "builtin_"+string(tc.kind), func(c *config) {
				c.Sinks.Kind = tc.kind
				c.Sinks.NATS.URL, c.Sinks.RabbitMQ.URL, c.Sinks.Redis.URL = brokerURL, brokerURL, brokerURL // only Kind's is used
				c.Registry = reg
				c.Sinks.TopicTemplate = "walrelaytest." + suffix + ".{aggregate_type}"
				c.Sinks.NATS.Stream = "WALRELAYTEST_" + strings.ToUpper(suffix)
				c.Sinks.RabbitMQ.ExchangeTemplate = "walrelaytest." + suffix
				c.Sinks.RabbitMQ.DeclareExchange = true
				c.Sinks.RabbitMQ.Mandatory = false // no queue bound: acks still prove the broker took them
			})
			var n int
			for i := 0; i < 5; i++ {
				n += len(testenv.WriteTx(t, conn, aggregates("bs", 5), "e", 20, false))
			}
			waitFor(t, time.Minute, "every row acked and published", func() bool {
				var pending int
				if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM outbox_events_pending").Scan(&pending); err != nil {
					t.Fatal(err)
				}
				return pending == 0
			})
			if got := testutil.ToFloat64(counter(t, reg, "outbox_events_published_total")); got != float64(n) {
				t.Fatalf("published %v, want %d", got, n)
			}
		})
	}
}

func counter(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	return metricByName(t, reg, name)
}

// cleanupBroker removes what the test left on the server, which matters when it is
// one named by a WALRELAY_TEST_* variable rather than the test's own.
func cleanupBroker(t *testing.T, kind sinks.Kind, brokerURL, suffix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	switch kind {
	case sinks.NATS:
		nc, err := natsgo.Connect(brokerURL)
		if err != nil {
			t.Logf("cleanup: %v", err)
			return
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err == nil {
			err = js.DeleteStream(ctx, "WALRELAYTEST_"+strings.ToUpper(suffix))
		}
		if err != nil {
			t.Logf("cleanup: %v", err)
		}
	case sinks.RabbitMQ:
		c, err := amqp.Dial(brokerURL)
		if err != nil {
			t.Logf("cleanup: %v", err)
			return
		}
		defer c.Close()
		ch, err := c.Channel()
		if err == nil {
			err = ch.ExchangeDelete("walrelaytest."+suffix, false, false)
		}
		if err != nil {
			t.Logf("cleanup: %v", err)
		}
	case sinks.Redis:
		opts, err := goredis.ParseURL(brokerURL)
		if err != nil {
			t.Logf("cleanup: %v", err)
			return
		}
		rc := goredis.NewClient(opts)
		defer rc.Close()
		for _, pattern := range []string{"walrelaytest." + suffix + ".*", "walrelay:dedup:walrelaytest." + suffix + ".*"} {
			iter := rc.Scan(ctx, 0, pattern, 1000).Iterator()
			for iter.Next(ctx) {
				rc.Unlink(ctx, iter.Val())
			}
		}
	}
}
