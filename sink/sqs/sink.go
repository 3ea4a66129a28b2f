package sqs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/walrelay/walrelay/internal/drain"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
)

// ErrClosed ends the delivery of events still waiting or in flight when the sink is
// closed. It is not an *sink.EventError: the relay streams them again.
var ErrClosed = errors.New("sqs sink closed before sqs accepted the event")

// Sink publishes events to Amazon SQS; see the package documentation.
type Sink struct {
	cfg       Config
	client    *sqs.Client
	queueName sink.Template
	templates sink.Templates // events' own (outbox.Event.TopicTemplate)
	literal   bool           // the template names one queue
	log       *slog.Logger
	lastWarn  atomic.Int64 // unix nanoseconds of the last "unavailable" warning

	wake      chan struct{} // 1-buffered: something became sendable
	cancel    context.CancelFunc
	stopped   chan struct{}  // closed when the dispatcher returned
	workers   sync.WaitGroup // requests and lookups under way
	closeOnce sync.Once

	// mu guards the queues and what they hold. Each event is in exactly one place:
	// waiting in its queue, in a request (its group busy), or being settled. mu is a
	// leaf: nothing calls SQS or done under it.
	mu struct {
		sync.Mutex
		queues      map[string]*queue // by name
		requests    int               // SendMessageBatch requests under way
		outstanding drain.Count       // published, done not called yet
		closed      bool
	}
}

// item is one published event until its done is called.
type item struct {
	ev     *outbox.Event
	done   sink.Done
	entry  types.SendMessageBatchRequestEntry
	size   int
	err    error // why SQS would refuse it: refused in its turn, never sent
	queued time.Time
	q      *queue
	group  *group // FIFO
	sent   bool   // taken into a request: its group is busy until it is settled
}

// New checks cfg and builds the client; it connects lazily. Close releases it.
func New(cfg Config) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sqs sink config: %w", err)
	}
	tmpl, _ := sink.ParseTemplate(cfg.QueueTemplate) // checked by Validate
	opts := []func(*config.LoadOptions) error{
		// The sink retries by itself, in place and for as long as it takes.
		config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConnsPerHost = cfg.MaxInFlightRequests + 2
		})),
	}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.Credentials != nil {
		opts = append(opts, config.WithCredentialsProvider(cfg.Credentials))
	}
	loadCtx, cancelLoad := context.WithTimeout(context.Background(), 30*time.Second)
	awsCfg, err := config.LoadDefaultConfig(loadCtx, opts...)
	cancelLoad()
	if err != nil {
		return nil, fmt.Errorf("sqs sink: load the AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		return nil, errors.New("sqs sink: no AWS region; set --sqs-region (or AWS_REGION, or a region in the AWS config file)")
	}
	client := sqs.NewFromConfig(awsCfg, func(o *sqs.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	})
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sink{
		cfg:       cfg,
		client:    client,
		queueName: tmpl,
		literal:   !strings.Contains(cfg.QueueTemplate, "{"),
		log:       log.With("sink", "sqs"),
		wake:      make(chan struct{}, 1),
		cancel:    cancel,
		stopped:   make(chan struct{}),
	}
	s.mu.queues = map[string]*queue{}
	go s.run(ctx)
	return s, nil
}

// Publish queues e in its queue; it never blocks. See sink.Sink.
func (s *Sink) Publish(e *outbox.Event, done sink.Done) {
	name := s.templates.Render(s.queueName, e)
	it := &item{ev: e, done: done, queued: time.Now()}
	nameErr := checkQueueName(name)
	fifo := strings.HasSuffix(name, fifoSuffix)
	if nameErr == nil {
		it.entry, it.size, it.err = recordMessage(&s.cfg.Format, e, fifo)
	}
	s.mu.Lock()
	s.mu.outstanding.Add(1)
	switch {
	case s.mu.closed:
		s.mu.Unlock()
		go s.finish(it, ErrClosed) // done is not called from inside Publish
		return
	case nameErr != nil:
		s.mu.Unlock()
		go s.finish(it, &sink.EventError{Err: fmt.Errorf("queue for event %s (from aggregate_type %q, event_type %q): %w",
			e.ID, e.AggregateType, e.EventType, nameErr)})
		return
	}
	q := s.mu.queues[name]
	if q == nil {
		q = newQueue(name, fifo)
		s.mu.queues[name] = q
	}
	q.push(it)
	s.mu.Unlock()
	s.signal()
}

// Flush waits until done was called for every published event, or ctx ends.
func (s *Sink) Flush(ctx context.Context) error {
	if left, err := s.mu.outstanding.Wait(ctx, &s.mu); err != nil {
		return fmt.Errorf("flush sqs sink: %d events still await sqs: %w", left, err)
	}
	return nil
}

// pingQueue is looked up by Ping when the template names no single queue: any
// answer but a refusal of the credentials shows that SQS is there and takes them.
const pingQueue = "walrelay-ping"

// Ping looks up the template's queue (or, for a template with placeholders, any
// queue name: SQS answering at all is what counts).
func (s *Sink) Ping(ctx context.Context) error {
	name := pingQueue
	if s.literal {
		name = s.cfg.QueueTemplate
	}
	_, err := s.client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err == nil || !s.literal && classify(err) == unusable {
		return nil
	}
	if s.literal && classify(err) == unusable {
		return fmt.Errorf("sqs queue %s: %w; create it, or change --topic-template", name, err)
	}
	return fmt.Errorf("sqs: %w", err)
}

// Close stops sending and fails every event still without an outcome with ErrClosed
// (some of them may be in a queue already: at least once).
func (s *Sink) Close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.mu.closed = true
		s.mu.Unlock()
		s.cancel() // ends requests in flight, their retries and the dispatcher
		<-s.stopped
		s.workers.Wait()
		s.mu.Lock()
		var left []*item
		for _, q := range s.mu.queues {
			left = q.drain(left)
		}
		s.mu.Unlock()
		for _, it := range left {
			s.finish(it, ErrClosed)
		}
	})
}

// finish calls it.done exactly once (each caller owns it), then counts it, so that
// Flush returns only after the call.
func (s *Sink) finish(it *item, err error) {
	it.done.Done(err)
	s.mu.Lock()
	s.mu.outstanding.Add(-1)
	s.mu.Unlock()
}

func (s *Sink) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
