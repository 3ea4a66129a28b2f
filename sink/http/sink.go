package http

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	nethttp "net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walrelay/walrelay/internal/backoff"
	"github.com/walrelay/walrelay/internal/drain"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
)

// ErrClosed ends the delivery of events still queued or in flight when the sink is
// closed. It is not an *sink.EventError: the relay streams them again.
var ErrClosed = errors.New("http sink closed before the endpoint took the event")

const (
	// warnEvery is how often failures of the endpoint are logged.
	warnEvery = 10 * time.Second
	// bodyExcerpt is how much of a refusal's body its error quotes.
	bodyExcerpt = 256
	// drainBody is how much of an answer is read so that its connection is kept.
	drainBody = 64 << 10
	// Backoff between attempts of an event the endpoint did not take.
	retryMin = 200 * time.Millisecond
	retryMax = 5 * time.Second
)

// Sink POSTs each event to an HTTP endpoint; see the package documentation. It
// implements sink.Sink and sink.ErrorReporter.
type Sink struct {
	cfg     Config
	url     *urlTemplate
	fixed   [][2]string
	keys    [][]byte
	client  *nethttp.Client
	tls     *tls.Config
	slots   chan struct{} // one per request under way (MaxConnections)
	now     func() time.Time
	log     *slog.Logger
	ctx     context.Context // ended by Close
	cancel  context.CancelFunc
	lastErr atomic.Pointer[error]
	warned  atomic.Int64 // unix nanoseconds of the last warning

	// mu guards the aggregates' queues; done is never called under it.
	mu struct {
		sync.Mutex
		aggregates  map[aggregate]*queue
		outstanding drain.Count // published, done not called yet
		closed      bool
	}
}

// aggregate is what order is kept within.
type aggregate struct{ typ, id string }

// queue is one aggregate's events in publish order; its first is being delivered
// by the aggregate's goroutine, the only one that sends for it.
type queue struct{ events []*pending }

// pending is one published event until its done is called.
type pending struct {
	ev      *outbox.Event
	done    sink.Done
	req     *request
	refused error // buildRequest's verdict: settled in its turn without a request
}

// New checks cfg and builds the client; it connects on the first request.
func New(cfg Config) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("http sink config: %w", err)
	}
	t, _ := parseURLTemplate(cfg.URL) // checked by Validate
	fixed, _ := cfg.fixedHeaders()
	keys, _ := cfg.secrets()
	tlsCfg, _ := cfg.tlsConfig()
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	transport := &nethttp.Transport{
		Proxy:               nethttp.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tlsCfg,
		TLSHandshakeTimeout: cfg.Timeout,
		ForceAttemptHTTP2:   true, // HTTP/2 where the server offers it, with a TLS config of our own too
		MaxConnsPerHost:     cfg.MaxConnections,
		MaxIdleConns:        cfg.MaxConnections,
		MaxIdleConnsPerHost: cfg.MaxConnections,
		IdleConnTimeout:     90 * time.Second,
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sink{cfg: cfg, url: t, fixed: fixed, keys: keys, tls: tlsCfg, now: now, log: log.With("sink", "http"),
		slots: make(chan struct{}, cfg.MaxConnections), ctx: ctx, cancel: cancel}
	s.client = &nethttp.Client{Transport: transport, Timeout: cfg.Timeout, CheckRedirect: sameHostRedirect}
	s.mu.aggregates = map[aggregate]*queue{}
	return s, nil
}

// sameHostRedirect follows 307 and 308 (which keep the method and the body) to the
// same scheme and host, at most 10 times; anything else is an errRedirect.
func sameHostRedirect(req *nethttp.Request, via []*nethttp.Request) error {
	status := 0
	if req.Response != nil {
		status = req.Response.StatusCode
	}
	first := via[0].URL
	if (status == nethttp.StatusTemporaryRedirect || status == nethttp.StatusPermanentRedirect) &&
		req.URL.Scheme == first.Scheme && req.URL.Host == first.Host && len(via) < 10 {
		return nil
	}
	return &errRedirect{status: status, target: req.URL.Redacted()}
}

// Publish queues e behind the earlier events of its aggregate; the aggregate's
// goroutine sends them one at a time. It never blocks on the endpoint.
func (s *Sink) Publish(e *outbox.Event, done sink.Done) {
	p := &pending{ev: e, done: done}
	p.req, p.refused = buildRequest(&s.cfg.Format, s.url, s.fixed, e)
	if p.refused != nil {
		p.refused = &sink.EventError{Final: true, Err: fmt.Errorf("event %s (aggregate_type %q, event_type %q): %w",
			e.ID, e.AggregateType, e.EventType, p.refused)}
	}
	s.mu.Lock()
	s.mu.outstanding.Add(1)
	if s.mu.closed {
		s.mu.Unlock()
		go s.finish(p, ErrClosed) // done is not called from inside Publish
		return
	}
	a := aggregate{e.AggregateType, e.AggregateID}
	q := s.mu.aggregates[a]
	if q == nil {
		q = &queue{}
		s.mu.aggregates[a] = q
		go s.run(a, q)
	}
	q.events = append(q.events, p)
	s.mu.Unlock()
}

// run delivers a's events in order, one at a time, and ends when none is left.
func (s *Sink) run(a aggregate, q *queue) {
	for {
		s.mu.Lock()
		if len(q.events) == 0 {
			delete(s.mu.aggregates, a)
			s.mu.Unlock()
			return
		}
		p := q.events[0]
		s.mu.Unlock()

		err := s.deliver(p)

		s.mu.Lock()
		q.events[0] = nil
		q.events = q.events[1:]
		s.mu.Unlock()
		s.finish(p, err)
	}
}

// deliver sends p until the endpoint takes it (nil) or refuses it (an
// *sink.EventError), or the sink is closed (ErrClosed). Anything else is retried in
// place after a backoff, with a new timestamp and signature each time.
func (s *Sink) deliver(p *pending) error {
	if p.refused != nil {
		return p.refused
	}
	var retry *backoff.Backoff
	for {
		select {
		case s.slots <- struct{}{}:
		case <-s.ctx.Done():
			return ErrClosed
		}
		c, wait, err := s.attempt(p)
		<-s.slots
		switch c {
		case delivered:
			s.lastErr.Store(nil)
			return nil
		case refused:
			return &sink.EventError{Err: fmt.Errorf("event %s: %w", p.ev.ID, err)}
		}
		if s.ctx.Err() != nil {
			return ErrClosed
		}
		if retry == nil {
			retry = backoff.New(retryMin, retryMax)
		}
		wait = max(wait, retry.Next())
		s.lastErr.Store(&err)
		s.warn(c, err, wait)
		if !backoff.Sleep(s.ctx, wait) {
			return ErrClosed
		}
	}
}

// attempt sends p once, signed now, and classifies the outcome; wait is the
// answer's Retry-After.
func (s *Sink) attempt(p *pending) (c class, wait time.Duration, err error) {
	req, err := nethttp.NewRequestWithContext(s.ctx, nethttp.MethodPost, p.req.url, bytes.NewReader(p.req.body))
	if err != nil {
		return unusable, 0, fmt.Errorf("request to %s: %w", s.url.base, err)
	}
	h := req.Header
	h["Content-Type"] = []string{p.req.contentType}
	for _, kv := range p.req.headers {
		h[kv[0]] = append(h[kv[0]], kv[1])
	}
	at := s.now()
	h[headerID] = []string{p.ev.ID}
	h[headerTimestamp] = []string{strconv.FormatInt(at.Unix(), 10)}
	if sig := signature(s.keys, p.ev.ID, at, p.req.body); sig != "" {
		h[headerSignature] = []string{sig}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		if isRedirect(err) {
			return unusable, 0, fmt.Errorf("post %s: %w", s.url.base, errors.Unwrap(err))
		}
		return unavailable, 0, fmt.Errorf("post to %s: %w", s.url.base, err)
	}
	defer resp.Body.Close()
	c = classifyStatus(resp.StatusCode, s.url.templated)
	var excerpt []byte
	if c != delivered {
		excerpt, _ = io.ReadAll(io.LimitReader(resp.Body, bodyExcerpt))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainBody)) // keeps the connection for the next request
	switch c {
	case delivered:
		return c, 0, nil
	case unavailable:
		if resp.StatusCode == nethttp.StatusTooManyRequests || resp.StatusCode == nethttp.StatusServiceUnavailable {
			wait = retryAfter(resp.Header, time.Now())
		}
	}
	return c, wait, &StatusError{URL: req.URL.Redacted(), Status: resp.StatusCode, Body: string(excerpt)}
}

// StatusError is an answer other than 2xx: its status and the first bytes of its
// body, which a dead letter keeps.
type StatusError struct {
	URL    string
	Status int
	Body   string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s answered %d %s: %q", e.URL, e.Status, nethttp.StatusText(e.Status), e.Body)
}

// Flush waits until done was called for every published event, or ctx ends.
func (s *Sink) Flush(ctx context.Context) error {
	if left, err := s.mu.outstanding.Wait(ctx, &s.mu); err != nil {
		return fmt.Errorf("http flush: %d events still await the endpoint: %w", left, err)
	}
	return nil
}

// Ping connects to the endpoint's host (TCP, and TLS for https), and sends nothing:
// a request would be an event to the receiver.
func (s *Sink) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", s.url.host)
	if err != nil {
		return fmt.Errorf("http ping %s: %w", s.url.base, err)
	}
	defer conn.Close()
	if s.url.scheme != "https" {
		return nil
	}
	cfg := &tls.Config{}
	if s.tls != nil {
		cfg = s.tls.Clone()
	}
	cfg.ServerName, _, _ = net.SplitHostPort(s.url.host)
	cfg.NextProtos = []string{"h2", "http/1.1"}
	if err := tls.Client(conn, cfg).HandshakeContext(ctx); err != nil {
		return fmt.Errorf("http ping %s: tls: %w", s.url.base, err)
	}
	return nil
}

// LastError is the last failure of an attempt since one succeeded, or nil.
func (s *Sink) LastError() error {
	if p := s.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Close fails every event without an outcome with ErrClosed (a request under way
// may have reached the endpoint: at least once) and releases the connections.
func (s *Sink) Close() {
	s.mu.Lock()
	s.mu.closed = true
	s.mu.Unlock()
	s.cancel()
	s.client.CloseIdleConnections()
}

// finish calls p's done, then counts it out, so that Flush returns only after the call.
func (s *Sink) finish(p *pending, err error) {
	p.done.Done(err)
	s.mu.Lock()
	s.mu.outstanding.Add(-1)
	s.mu.Unlock()
}

// warn logs a failure of the endpoint, at most once per warnEvery.
func (s *Sink) warn(c class, err error, retryIn time.Duration) {
	now := time.Now().UnixNano()
	last := s.warned.Load()
	if now-last < int64(warnEvery) || !s.warned.CompareAndSwap(last, now) {
		return
	}
	msg := "http endpoint unavailable; its events are held and sent again in order, nothing is lost"
	if c == unusable {
		msg = "http endpoint refuses every event (wrong URL or credentials?); its events are held and sent again in order until it takes them; check --http-url and --http-headers"
	}
	s.log.Warn(msg, "err", err, "retry_in", retryIn.Round(time.Millisecond).String())
}
