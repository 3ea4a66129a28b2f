package pubsub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	vkit "cloud.google.com/go/pubsub/v2/apiv1"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/walrelay/walrelay/internal/drain"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
)

// ErrClosed ends the delivery of events still queued or in flight when the sink is
// closed. It is not an *sink.EventError: the relay streams them again.
var ErrClosed = errors.New("pubsub sink closed before pubsub confirmed the event")

const (
	// stopTimeout bounds Close's wait for the client's publishers to stop.
	stopTimeout = 5 * time.Second
	// warnEvery is how often failures of the service are logged.
	warnEvery = 10 * time.Second
	// pingTopic is the topic Ping asks for: any answer from the service will do.
	pingTopic = "walrelay-ping"
)

// Sink publishes to Google Pub/Sub; see the package documentation. It implements
// sink.Sink.
type Sink struct {
	cfg       Config
	client    *gpubsub.Client
	topic     sink.Template
	templates sink.Templates // events' own (outbox.Event.TopicTemplate)
	log       *slog.Logger
	lastWarn  atomic.Int64 // unix nanoseconds of the last warning
	closeOnce sync.Once

	// mu guards the events the sink holds and the ordering keys' state (order.go).
	// It is held while events are handed to the client, whose Publish does not
	// block, so that they reach it in publish order; done is never called under it.
	mu struct {
		sync.Mutex
		publishers  map[string]*gpubsub.Publisher // by topic ID
		keys        map[orderingKey]*key
		outstanding drain.Count // published, done not called yet
		closed      bool
	}
}

// New checks cfg and creates the client; it connects lazily. Close releases it.
func New(cfg Config) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("pubsub sink config: %w", err)
	}
	tmpl, _ := sink.ParseTemplate(cfg.TopicTemplate) // checked by Validate
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	client, err := gpubsub.NewClientWithConfig(context.Background(), cfg.Project, &gpubsub.ClientConfig{
		TopicAdminCallOptions: &vkit.TopicAdminCallOptions{Publish: []gax.CallOption{publishRetry()}},
	}, clientOptions(cfg)...)
	if err != nil {
		return nil, fmt.Errorf("pubsub client for project %s: %w; credentials come from --pubsub-credentials-file, "+
			"GOOGLE_APPLICATION_CREDENTIALS, gcloud's application default login or the metadata server", cfg.Project, err)
	}
	s := &Sink{cfg: cfg, client: client, topic: tmpl, log: log.With("sink", "pubsub")}
	s.mu.publishers = map[string]*gpubsub.Publisher{}
	s.mu.keys = map[orderingKey]*key{}
	return s, nil
}

// clientOptions reach the emulator in plaintext without credentials, or the service
// at its endpoint with the credentials file or the default chain. Reconnects wait
// at most 2s (gRPC's default grows to 2 minutes), so that events flow soon after an
// outage.
func clientOptions(cfg Config) []option.ClientOption {
	opts := []option.ClientOption{option.WithGRPCDialOption(grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           grpcbackoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
		MinConnectTimeout: 5 * time.Second,
	}))}
	switch {
	case cfg.EmulatorHost != "":
		opts = append(opts, option.WithEndpoint(cfg.EmulatorHost), option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())), option.WithTelemetryDisabled())
	case cfg.Endpoint != "":
		opts = append(opts, option.WithEndpoint(cfg.Endpoint))
	}
	if cfg.CredentialsFile != "" {
		opts = append(opts, option.WithAuthCredentialsFile(option.ServiceAccount, cfg.CredentialsFile))
	}
	return append(opts, cfg.Opts...)
}

// publishRetry is the client's retry of one publish request within
// Publish.Timeout: the client's own codes but Canceled (a closed client), with
// waits capped at 2s (the client's default grows them to 60s, which would hold a
// recovered service's events for up to a minute).
func publishRetry() gax.CallOption {
	return gax.WithRetry(func() gax.Retryer {
		return gax.OnCodes([]codes.Code{codes.Aborted, codes.Internal, codes.ResourceExhausted, codes.Unknown,
			codes.Unavailable, codes.DeadlineExceeded}, gax.Backoff{Initial: 100 * time.Millisecond, Max: 2 * time.Second, Multiplier: 2})
	})
}

// Publish queues e behind the earlier events of its ordering key and hands it to the
// client when the key's rule allows (order.go); it never blocks on the service.
func (s *Sink) Publish(e *outbox.Event, done sink.Done) {
	topic := s.templates.Render(s.topic, e)
	p := &pending{ev: e, done: done, topic: topic, msg: message(&s.cfg.Format, e)}
	if err := check(topic, p.msg); err != nil {
		p.refused = fmt.Errorf("event %s (aggregate_type %q, event_type %q): %w", e.ID, e.AggregateType, e.EventType, err)
	}
	s.mu.Lock()
	s.mu.outstanding.Add(1)
	if s.mu.closed {
		s.mu.Unlock()
		go s.finish(p, ErrClosed) // done is not called from inside Publish
		return
	}
	id := orderingKey{topic: topic, key: p.msg.OrderingKey}
	k := s.mu.keys[id]
	if k == nil {
		k = &key{id: id}
		s.mu.keys[id] = k
	}
	k.queue = append(k.queue, p)
	s.sendLocked(k)
	s.mu.Unlock()
}

// publisherLocked is topic's publisher, created on first use with message ordering.
func (s *Sink) publisherLocked(topic string) *gpubsub.Publisher {
	pub := s.mu.publishers[topic]
	if pub == nil {
		pub = s.client.Publisher(topic)
		pub.EnableMessageOrdering = true
		pub.PublishSettings = s.cfg.Publish
		// Blocking would stall Publish under mu; the relay's window is the flow control.
		pub.PublishSettings.FlowControlSettings.LimitExceededBehavior = gpubsub.FlowControlIgnore
		s.mu.publishers[topic] = pub
	}
	return pub
}

// Flush waits until done was called for every published event, or ctx ends.
func (s *Sink) Flush(ctx context.Context) error {
	if left, err := s.mu.outstanding.Wait(ctx, &s.mu); err != nil {
		return fmt.Errorf("pubsub flush: %d events still await pubsub: %w", left, err)
	}
	return nil
}

// Ping asks the service for a topic: any answer about the topic (it exists, it does
// not, it may not be read) shows that the service is reachable and takes the
// credentials, so Ping needs no permission beyond publishing.
func (s *Sink) Ping(ctx context.Context) error {
	_, err := s.client.TopicAdminClient.GetTopic(ctx, &pb.GetTopicRequest{Topic: "projects/" + s.cfg.Project + "/topics/" + pingTopic})
	switch status.Code(err) {
	case codes.OK, codes.NotFound, codes.PermissionDenied:
		return nil
	}
	return fmt.Errorf("pubsub ping (project %s): %w", s.cfg.Project, err)
}

// Close fails every event still without an outcome with ErrClosed (some may be in
// Pub/Sub already: at least once), stops the publishers and releases the client.
func (s *Sink) Close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.mu.closed = true
		var left []*pending
		for _, k := range s.mu.keys {
			left = append(left, k.queue...)
			left = append(left, k.flight...) // a waiter still owns the slice; finish only marks them
			left = append(left, k.failed...)
			k.queue, k.failed = nil, nil
		}
		pubs := make([]*gpubsub.Publisher, 0, len(s.mu.publishers))
		for _, pub := range s.mu.publishers {
			pubs = append(pubs, pub)
		}
		s.mu.Unlock()
		for _, p := range left {
			s.finish(p, ErrClosed)
		}
		stopped := make(chan struct{})
		go func() {
			for _, pub := range pubs {
				pub.Stop() // sends what the client holds; returns once each has an outcome
			}
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-time.After(stopTimeout):
			s.log.Warn("pubsub publishers did not stop in time; closing the client", "timeout", stopTimeout.String())
		}
		_ = s.client.Close()
	})
}

// finish calls p's done once with err (Close and a waiter may both try), then
// counts it out, so that Flush returns only after the call.
func (s *Sink) finish(p *pending, err error) {
	s.mu.Lock()
	if p.settled {
		s.mu.Unlock()
		return
	}
	p.settled = true
	s.mu.Unlock()
	p.done.Done(err)
	s.mu.Lock()
	s.mu.outstanding.Add(-1)
	s.mu.Unlock()
}

// warn logs a failure of the service, at most once per warnEvery.
func (s *Sink) warn(k *key, err error, held int, retryIn time.Duration) {
	now := time.Now().UnixNano()
	last := s.lastWarn.Load()
	if now-last < int64(warnEvery) || !s.lastWarn.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn("pubsub unavailable; the ordering key's events are held and sent again in order, nothing is lost",
		"err", err, "topic", k.id.topic, "ordering_key", k.id.key, "held_events", held, "retry_in", retryIn.Round(time.Millisecond).String())
}
