package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Kafka starts an in-process Kafka-protocol cluster for the test.
func Kafka(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(4)}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// Consumer reads every topic matching the regular expression from the start.
type Consumer struct {
	t       testing.TB
	client  *kgo.Client
	Records []*kgo.Record
	ids     map[string]int
}

// NewConsumer starts a consumer of the topics matching topicRegex.
// Extra options (TLS, SASL) go after the harness's own.
func NewConsumer(t testing.TB, brokers []string, topicRegex string, opts ...kgo.Opt) *Consumer {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumeRegex(), kgo.ConsumeTopics(topicRegex),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.MetadataMinAge(100 * time.Millisecond), kgo.MetadataMaxAge(time.Second)}, opts...)...)
	if err != nil {
		t.Fatalf("kafka consumer: %v", err)
	}
	t.Cleanup(cl.Close)
	return &Consumer{t: t, client: cl, ids: map[string]int{}}
}

// Distinct is the number of distinct event ids consumed so far.
func (c *Consumer) Distinct() int { return len(c.ids) }

// Count returns how often the event id was consumed.
func (c *Consumer) Count(id string) int { return c.ids[id] }

// WaitFor consumes until done returns true or the timeout ends (a test failure
// naming what was still missing is the caller's job: WaitFor returns false).
func (c *Consumer) WaitFor(timeout time.Duration, done func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		fetches := c.client.PollFetches(ctx)
		cancel()
		fetches.EachRecord(func(r *kgo.Record) {
			c.Records = append(c.Records, r)
			c.ids[Header(r, "id")]++
		})
	}
	return true
}

// WaitDistinct consumes until n distinct event ids arrived.
func (c *Consumer) WaitDistinct(timeout time.Duration, n int) bool {
	return c.WaitFor(timeout, func() bool { return len(c.ids) >= n })
}

// Header returns a record header's value.
func Header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
