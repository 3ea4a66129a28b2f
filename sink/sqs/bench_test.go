package sqs_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/internal/testenv/sqsserver"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/sink/sqs"
)

const (
	benchAggregates = 200
	benchPayload    = 200 // bytes of padding in each payload
)

// BenchmarkDrain compares the relay draining b.N streamed events into a FIFO queue
// of the test server with the server's own ceiling: a client sending the same
// number of messages of the same size, 10 per SendMessageBatch, from as many
// goroutines as the sink has requests in flight (make bench: -benchtime 20000x).
func BenchmarkDrain(b *testing.B) {
	b.Run("relay", benchRelayDrain)
	b.Run("ceiling", benchCeiling)
}

// benchRelayDrain streams b.N committed events: a first relay run creates the slot,
// the backlog is committed while no relay runs, and a second run, timed from its
// start to the last message stored, streams it.
func benchRelayDrain(b *testing.B) {
	srv := sqsserver.Start(b, sqsserver.Options{})
	srv.CreateQueue("outbox-order.fifo", 0)
	dbURL := testenv.MigratedDatabase(b)
	conn := testenv.Connect(b, dbURL)
	slot := fmt.Sprintf("bench_sqs_%d", b.N)
	run := func() (stop func()) {
		snk := newSink(b, config(srv, sqsDefaultTemplate))
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
	b.ResetTimer()
	stop = run()
	if !testenv.Eventually(5*time.Minute, func() bool { return srv.Count("outbox-order.fifo") >= b.N }) {
		b.Fatalf("stored %d of %d", srv.Count("outbox-order.fifo"), b.N)
	}
	b.StopTimer()
	stop()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.N)/float64(srv.Calls("SendMessageBatch")), "entries/request")
}

// benchCeiling sends b.N messages like the sink's straight to the server.
func benchCeiling(b *testing.B) {
	srv := sqsserver.Start(b, sqsserver.Options{})
	srv.CreateQueue("outbox-order.fifo", 0)
	client := awssqs.New(awssqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Retryer: aws.NopRetryer{},
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")})
	url := srv.URL + "/" + sqsserver.Account + "/outbox-order.fifo"
	payload := `{"seq": 1, "pad": "` + strings.Repeat("x", benchPayload) + `"}`
	attr := func(v string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range sqs.DefaultMaxInFlightRequests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				first := next.Add(10) - 10
				if first >= int64(b.N) {
					return
				}
				var entries []types.SendMessageBatchRequestEntry
				for i := first; i < min(first+10, int64(b.N)); i++ {
					id := fmt.Sprintf("0b9d3f8e-0000-4000-8000-%012d", i)
					agg := "agg-" + strconv.FormatInt(i%benchAggregates, 10)
					entries = append(entries, types.SendMessageBatchRequestEntry{
						Id: aws.String(strconv.FormatInt(i-first, 10)), MessageBody: aws.String(payload),
						MessageGroupId: aws.String(agg), MessageDeduplicationId: aws.String(id),
						MessageAttributes: map[string]types.MessageAttributeValue{"id": attr(id), "event_type": attr("order.created"),
							"aggregate_type": attr("order"), "aggregate_id": attr(agg), "created_at": attr(time.Now().UTC().Format(time.RFC3339Nano))},
					})
				}
				out, err := client.SendMessageBatch(context.Background(), &awssqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
				if err != nil {
					b.Errorf("send: %v", err)
					return
				}
				if len(out.Failed) > 0 {
					b.Errorf("send: %d entries failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if n := srv.Count("outbox-order.fifo"); n != b.N {
		b.Fatalf("stored %d of %d", n, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
