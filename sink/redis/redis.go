package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/walrelay/walrelay/internal/drain"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
)

// ErrClosed ends the delivery of events still queued or in flight when the sink is
// closed. It is not an *sink.EventError: the relay streams them again.
var ErrClosed = errors.New("redis sink closed before redis confirmed the event")

// Sink publishes to Redis Streams. It implements sink.Sink.
type Sink struct {
	cfg       Config
	client    *goredis.Client
	stream    sink.Template
	templates sink.Templates // events' own (outbox.Event.TopicTemplate)
	log       *slog.Logger
	windowArg string // DedupWindow in milliseconds, the script's ARGV[1]
	maxLenArg string // MaxLen, the script's ARGV[2]

	wake     chan struct{}      // a Publish happened; capacity 1
	stop     context.CancelFunc // ends the sender's retries (Close)
	stopped  chan struct{}      // closed when the sender returned
	closeOne sync.Once

	mu struct {
		sync.Mutex
		queue       []*item     // published, not yet taken by the sender
		outstanding drain.Count // published, done not called yet (queued or in flight)
		closed      bool
	}
}

// item is one published event.
type item struct {
	ev     *outbox.Event
	done   sink.Done
	stream string
}

// New checks cfg and creates the client; it connects lazily. Close releases it.
func New(cfg Config) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("redis sink config: %w", err)
	}
	tmpl, _ := sink.ParseTemplate(cfg.StreamTemplate) // checked by Validate
	opts, _ := goredis.ParseURL(cfg.URL)              // checked by Validate
	if opts.ClientName == "" {
		opts.ClientName = "walrelay"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sink{
		cfg:       cfg,
		client:    goredis.NewClient(opts),
		stream:    tmpl,
		log:       log.With("sink", "redis"),
		windowArg: windowArg(cfg.DedupWindow),
		maxLenArg: strconv.FormatInt(cfg.MaxLen, 10),
		wake:      make(chan struct{}, 1),
		stop:      cancel,
		stopped:   make(chan struct{}),
	}
	go s.run(ctx)
	return s, nil
}

// Publish queues e for the next batch and returns; see sink.Sink. It never waits,
// however many events await Redis: the relay calls it on the goroutine that reads
// the WAL and answers the server (docs/design.md invariant 4), and its callers
// bound what they have in flight (the relay's window, the poller's batch, a
// replay's window), so they bound the queue.
func (s *Sink) Publish(e *outbox.Event, done sink.Done) {
	it := &item{ev: e, done: done, stream: s.templates.Render(s.stream, e)}
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		done.Done(ErrClosed)
		return
	}
	s.mu.queue = append(s.mu.queue, it)
	s.mu.outstanding.Add(1)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Flush waits until done was called for every published event, or ctx ends.
func (s *Sink) Flush(ctx context.Context) error {
	if left, err := s.mu.outstanding.Wait(ctx, &s.mu); err != nil {
		return fmt.Errorf("redis flush: %d events still await redis: %w", left, err)
	}
	return nil
}

// Ping sends PING and waits for the answer until ctx ends, not longer: go-redis
// bounds a read by its own timeout and retries it, whatever ctx says, so a server
// that accepts and never answers would hold the caller for several read timeouts.
// The PING left waiting ends with those.
func (s *Sink) Ping(ctx context.Context) error {
	res := make(chan error, 1)
	go func() { res <- s.client.Ping(ctx).Err() }()
	select {
	case err := <-res:
		if err != nil {
			return fmt.Errorf("redis ping: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("redis ping: no answer: %w", ctx.Err())
	}
}

// Close stops the sender and releases the client. Events not yet confirmed by Redis
// end with ErrClosed (some of them may be in a stream already: at least once).
func (s *Sink) Close() {
	s.closeOne.Do(func() {
		s.mu.Lock()
		s.mu.closed = true
		s.mu.Unlock()
		s.stop()
		_ = s.client.Close() // interrupts a call in flight
		<-s.stopped
		s.mu.Lock()
		rest := s.mu.queue
		s.mu.queue = nil
		s.mu.Unlock()
		s.settle(rest, ErrClosed)
	})
}

// settle calls done for items with err, then counts them as finished.
func (s *Sink) settle(items []*item, err error) {
	for _, it := range items {
		it.done.Done(err)
	}
	s.finished(len(items))
}

// finished counts n events whose done was called.
func (s *Sink) finished(n int) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.outstanding.Add(-n)
}
