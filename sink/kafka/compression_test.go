package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/kafka"
)

// Each --kafka-compression reaches the broker as the record batches' codec, and the
// records read back intact.
func TestCompression(t *testing.T) {
	for _, tc := range []struct {
		name  string
		codec uint8 // the record batch attribute Kafka stores
	}{{"none", 0}, {"gzip", 1}, {"", 2}, {"snappy", 2}, {"lz4", 3}, {"zstd", 4}} {
		t.Run("compression "+tc.name, func(t *testing.T) {
			broker := testenv.Kafka(t)
			s, err := kafka.New(kafka.Config{Brokers: broker.ListenAddrs(), TopicTemplate: "c.{aggregate_type}", Compression: tc.name})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			const n = 50
			errs := make(chan error, n)
			for i := range n {
				s.Publish(&outbox.Event{ID: fmt.Sprintf("id-%d", i), AggregateType: "order", AggregateID: fmt.Sprintf("agg-%d", i%5),
					EventType: "order.created", Payload: []byte(`{"n":` + fmt.Sprint(i) + `,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`),
					CreatedAt: time.Now()}, sink.DoneFunc(func(err error) { errs <- err }))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			for range n {
				if err := <-errs; err != nil {
					t.Fatalf("publish: %v", err)
				}
			}
			c := testenv.NewConsumer(t, broker.ListenAddrs(), "c\\.order")
			if !c.WaitDistinct(30*time.Second, n) {
				t.Fatalf("read back %d of %d events", c.Distinct(), n)
			}
			for _, r := range c.Records {
				if got := uint8(r.Attrs.CompressionType()); got != tc.codec {
					t.Fatalf("record %s in a batch with codec %d, want %d", testenv.Header(r, "id"), got, tc.codec)
				}
			}
		})
	}
	if err := kafka.CheckCompression("brotli"); err == nil {
		t.Error("CheckCompression accepted brotli")
	}
}
