package sqs_test

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/internal/testenv/sqsserver"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/sqs"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

var waitFor = testenv.Eventually

// config is a sink configuration for srv: static test credentials, so nothing
// looks further (no instance metadata), and the test's queue template.
func config(srv *sqsserver.Server, template string) sqs.Config {
	cfg := sqs.DefaultConfig()
	cfg.QueueTemplate = template
	cfg.Region = "us-east-1"
	cfg.Endpoint = srv.URL
	cfg.Credentials = credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")
	return cfg
}

// newSink creates a sink closed at the end of the test.
func newSink(t testing.TB, cfg sqs.Config) *sqs.Sink {
	t.Helper()
	s, err := sqs.New(cfg)
	if err != nil {
		t.Fatalf("sqs.New: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// event is an event of aggregate agg with a payload naming its sequence number.
func event(aggType, agg string, seq int) *outbox.Event {
	return &outbox.Event{
		ID:            fmt.Sprintf("0b9d3f8e-0000-4000-8000-%012d", seq),
		AggregateType: aggType,
		AggregateID:   agg,
		EventType:     aggType + ".updated",
		Payload:       []byte(fmt.Sprintf(`{"seq": %d}`, seq)),
		CreatedAt:     time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("CEST", 2*3600)),
	}
}

// outcomes records done calls per published event, and when they came.
type outcomes struct {
	mu    sync.Mutex
	calls map[string][]error
	at    map[string]time.Time
	n     int
}

func newOutcomes() *outcomes {
	return &outcomes{calls: map[string][]error{}, at: map[string]time.Time{}}
}

// publish hands e to s, recording its outcome.
func (o *outcomes) publish(s sink.Sink, e *outbox.Event) {
	s.Publish(e, sink.DoneFunc(func(err error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.calls[e.ID] = append(o.calls[e.ID], err)
		o.at[e.ID] = time.Now()
		o.n++
	}))
}

func (o *outcomes) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n
}

// of returns the errors done was called with for the event with id.
func (o *outcomes) of(id string) []error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]error(nil), o.calls[id]...)
}

// when is the time of the event's done call.
func (o *outcomes) when(id string) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.at[id]
}

// ids are the deduplication ids (the event ids) of the messages, in queue order.
func ids(msgs []sqsserver.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Attributes["id"]
	}
	return out
}
