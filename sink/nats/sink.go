package nats

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/walrelay/walrelay/internal/drain"
	"github.com/walrelay/walrelay/internal/redact"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
)

const (
	// ackTimeout is how long a PubAck may take before the attempt counts as
	// transient failure and the message is sent again (deduplicated by id).
	ackTimeout = 10 * time.Second
	// transientRetries is how often a message is sent again after transient
	// failures while connected before its outcome is an error.
	transientRetries = 4
	// stallWait bounds one wait for a free slot under MaxPending; the sender
	// then tries again (it owns the wait, Publish never blocks).
	stallWait = time.Second
	// lookupTimeout bounds the stream lookup after no responders, and stream
	// creation there.
	lookupTimeout = 5 * time.Second
	// drainTimeout bounds Close's drain of the connection.
	drainTimeout = 5 * time.Second
)

// Sink publishes events to NATS JetStream; see the package documentation.
type Sink struct {
	cfg       Config
	subject   sink.Template
	templates sink.Templates // events' own (outbox.Event.TopicTemplate)
	filter    string         // subjects of a stream the sink creates ("" without CreateStream)

	nc        *nats.Conn
	js        jetstream.JetStream
	connected chan nats.Status // CONNECTED events, wake the sender after an outage
	closedCh  chan nats.Status // CLOSED event, ends Close's wait for the drain

	lastAck atomic.Int64 // unix nanoseconds of the newest PubAck
	seq     atomic.Uint64

	wake    chan struct{} // 1-buffered: the queue changed
	cancel  context.CancelFunc
	stopped chan struct{} // closed when the sender returned

	closeOnce sync.Once

	// mu guards the events the sink holds. Each event is in exactly one place:
	// queue (waiting to be sent), inflight (sent, outcome pending) or the sender's
	// hands between the two. mu is a leaf: nothing calls into nats or done under it.
	mu struct {
		sync.Mutex
		queue       queue
		inflight    map[*nats.Msg]*pending
		outstanding drain.Count // Publish calls whose done has not been called
		closed      bool
	}
}

// pending is one published event until its done is called.
type pending struct {
	seq  uint64
	msg  *nats.Msg
	done sink.Done

	// Written by whoever owns the event (see Sink.mu), handed over under mu.
	err       error     // fail without sending (the subject is invalid)
	lookup    bool      // the last attempt had no responders: look up the stream first
	attempts  int       // transient failures while connected
	sent      int64     // unix nanoseconds of the first send
	notBefore time.Time // backoff after a transient failure
}

// New validates cfg, connects (reconnecting for ever once connected), and makes
// sure the stream exists when cfg.CreateStream is set.
func New(cfg Config) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("nats sink config: %w", err)
	}
	cfg = cfg.withDefaults()
	tmpl, err := sink.ParseTemplate(cfg.SubjectTemplate)
	if err != nil {
		return nil, err
	}
	s := &Sink{
		cfg:     cfg,
		subject: tmpl,
		wake:    make(chan struct{}, 1),
		stopped: make(chan struct{}),
	}
	if cfg.CreateStream {
		if s.filter, err = streamSubject(cfg.SubjectTemplate); err != nil {
			return nil, err
		}
	}
	s.mu.inflight = map[*nats.Msg]*pending{}

	opts := []nats.Option{
		nats.Name("walrelay"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.ReconnectJitter(500*time.Millisecond, time.Second),
		// No reconnect buffer: while disconnected the sender holds events itself
		// and sends them in order once connected. Messages the client buffered
		// would go out ahead of the resent in-flight ones and break the order.
		nats.ReconnectBufSize(-1),
		nats.Timeout(5 * time.Second),
		nats.PingInterval(10 * time.Second),
		nats.MaxPingsOutstanding(3),
		nats.DrainTimeout(drainTimeout),
	}
	opts = append(opts, cfg.Opts...)
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, redact.Error(fmt.Errorf("connect to nats %s: %w", cfg.URL, err), cfg.URL)
	}
	s.nc = nc
	s.connected = nc.StatusChanged(nats.CONNECTED)
	s.closedCh = nc.StatusChanged(nats.CLOSED)
	s.js, err = jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(cfg.MaxPending),
		jetstream.WithPublishAsyncTimeout(ackTimeout),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) { s.acked(m) }),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) { s.nacked(m, err) }),
	)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if cfg.CreateStream && nc.IsConnected() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := s.ensureStream(ctx)
		cancel()
		if err != nil {
			nc.Close()
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.run(ctx)
	return s, nil
}

// Publish queues e for the sender; it never blocks on the broker. See sink.Sink.
func (s *Sink) Publish(e *outbox.Event, done sink.Done) {
	subject := s.templates.Render(s.subject, e)
	value, tombstone := s.cfg.Format.Value(e)
	p := &pending{
		seq: s.seq.Add(1),
		msg: &nats.Msg{
			Subject: subject,
			Data:    value,
			Header:  nats.Header{jetstream.MsgIDHeader: {e.ID}},
		},
		done: done,
	}
	s.cfg.Format.EachHeader(e, func(key string, v []byte) {
		// As given, not canonicalised: NATS headers are case-sensitive.
		p.msg.Header[key] = append(p.msg.Header[key], string(v))
	})
	if tombstone {
		p.msg.Header["tombstone"] = []string{"true"}
	}
	if err := checkSubject(subject); err != nil {
		p.err = fmt.Errorf("%w (made from aggregate_type %q, event_type %q)", err, e.AggregateType, e.EventType)
	}
	s.mu.Lock()
	s.mu.outstanding.Add(1)
	if s.mu.closed {
		s.mu.Unlock()
		go s.finish(p, errClosed) // done is not called from inside Publish
		return
	}
	s.mu.queue.push(p)
	s.mu.Unlock()
	s.signal()
}

// Flush waits until every published event had its done called, or ctx ends.
func (s *Sink) Flush(ctx context.Context) error {
	if left, err := s.mu.outstanding.Wait(ctx, &s.mu); err != nil {
		return fmt.Errorf("flush nats sink: %d events still without a PubAck: %w", left, err)
	}
	return nil
}

// Ping checks that the server answers JetStream requests and that the stream
// exists (creating it when CreateStream is set).
func (s *Sink) Ping(ctx context.Context) error {
	if st := s.nc.Status(); st != nats.CONNECTED {
		return fmt.Errorf("nats %s: not connected (%s); the client keeps reconnecting", redact.URL(s.cfg.URL), st)
	}
	if _, err := s.js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("jetstream account info: %w", err)
	}
	return s.checkStream(ctx)
}

// Close stops sending, drains the connection (acks already on their way still
// count) and fails every event still without an outcome with a broker-level error.
func (s *Sink) Close() {
	s.closeOnce.Do(func() {
		s.cancel()
		<-s.stopped
		if err := s.nc.Drain(); err == nil {
			select {
			case <-s.closedCh:
			case <-time.After(drainTimeout + time.Second):
			}
		}
		s.nc.Close()

		s.mu.Lock()
		s.mu.closed = true
		left := make([]*pending, 0, len(s.mu.queue)+len(s.mu.inflight))
		left = append(left, s.mu.queue...)
		s.mu.queue = nil
		for _, p := range s.mu.inflight {
			left = append(left, p)
		}
		clear(s.mu.inflight)
		s.mu.Unlock()
		for _, p := range left {
			s.finish(p, errClosed)
		}
	})
}

// acked is the PubAck callback: the stream stored the message (or had it already).
func (s *Sink) acked(m *nats.Msg) {
	p := s.untrack(m)
	if p == nil {
		return
	}
	s.lastAck.Store(time.Now().UnixNano())
	s.finish(p, nil)
}

// nacked is the async error callback of one publish attempt.
func (s *Sink) nacked(m *nats.Msg, err error) {
	if p := s.untrack(m); p != nil {
		s.fail(p, err)
	}
}

// fail decides what a failed attempt means for p: send it again, or call done.
func (s *Sink) fail(p *pending, err error) {
	switch classify(err) {
	case classReconnect:
		s.requeue(p, 0)
	case classNoResponders:
		p.lookup = true
		s.requeue(p, 0)
	case classTransient:
		if !s.nc.IsConnected() {
			s.requeue(p, 0) // the outage explains it; the sender waits for the connection
			return
		}
		p.attempts++
		if p.attempts <= transientRetries {
			s.requeue(p, min(100*time.Millisecond<<(p.attempts-1), 2*time.Second))
			return
		}
		err = fmt.Errorf("subject %q: no PubAck after %d attempts: %w", p.msg.Subject, p.attempts, err)
		if s.lastAck.Load() > p.sent {
			s.finish(p, &sink.EventError{Err: fmt.Errorf("%w (other events were acknowledged meanwhile)", err)})
			return
		}
		s.finish(p, err)
	case classEvent:
		s.finish(p, &sink.EventError{Err: fmt.Errorf("subject %q: %w", p.msg.Subject, err)})
	default:
		s.finish(p, fmt.Errorf("subject %q: %w", p.msg.Subject, err))
	}
}

// finish calls p.done exactly once (each caller owns p), then counts it, so that
// Flush returns only after the calls.
func (s *Sink) finish(p *pending, err error) {
	p.done.Done(err)
	s.mu.Lock()
	s.mu.outstanding.Add(-1)
	s.mu.Unlock()
}
