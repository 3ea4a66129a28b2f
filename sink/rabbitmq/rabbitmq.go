package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/walrelay/walrelay/internal/drain"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/sink"
)

// closeTimeout bounds the close handshake with the broker when the sink closes.
const closeTimeout = 2 * time.Second

var errClosed = errors.New("rabbitmq sink is closed")

// Sink publishes to RabbitMQ with publisher confirms. It holds one connection and
// one confirm-mode channel at a time and replaces them when they fail.
type Sink struct {
	cfg        Config
	addr       string // host:port, for messages (the URL may hold a password)
	exchange   sink.Template
	routingKey sink.Template
	log        *slog.Logger

	wake      chan struct{} // capacity 1: queued work or a freed window for the writer
	stop      chan struct{} // closed by Close
	runDone   chan struct{} // closed when the connection loop returned
	closeOnce sync.Once

	// mu guards the events between Publish and done. It is the only lock of the
	// package; no amqp call and no done callback runs while it is held.
	mu struct {
		sync.Mutex
		queue    []*message  // accepted, not on the wire, in publish order
		inflight []*message  // on the current channel, unconfirmed, in delivery-tag order
		pending  drain.Count // events whose done has not returned yet

		link       *link // current connection; nil while reconnecting
		connected  bool  // a confirm channel is up
		lastErr    error // why the sink is disconnected
		closed     bool
		progress   bool // a confirm arrived on the current connection
		softStreak int  // channel exceptions since the last confirm or isolated culprit
	}
}

// message is one event on its way to the broker.
type message struct {
	ev       *outbox.Event
	done     sink.Done
	exchange string
	key      string
	pub      amqp.Publishing
	tag      uint64      // delivery tag on the current channel while in flight
	suspect  bool        // in flight when a channel exception hit: travels alone
	settled  atomic.Bool // done was called
}

// New validates cfg, connects and opens a channel in confirm mode. Afterwards the
// sink reconnects by itself.
func New(cfg Config) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	uri, _ := amqp.ParseURI(cfg.URL) // checked by Validate
	exch, _ := sink.ParseTemplate(cfg.ExchangeTemplate)
	key, _ := sink.ParseTemplate(cfg.RoutingKeyTemplate)
	s := &Sink{
		cfg:        cfg,
		addr:       net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port)),
		exchange:   exch,
		routingKey: key,
		log:        cfg.Logger,
		wake:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		runDone:    make(chan struct{}),
	}
	l, cs, err := s.dial()
	if err != nil {
		return nil, err
	}
	s.mu.link, s.mu.connected = l, true
	go s.run(l, cs)
	return s, nil
}

// headers is the headers table of e's message: the record's headers (package
// record) as strings, a null value as AMQP's void. With walrelay's own headers the
// id is the message_id property alone, as it always was; Debezium's (IDHeaderOnly)
// keep it as the id header their consumers read.
func (s *Sink) headers(e *outbox.Event) amqp.Table {
	f := &s.cfg.Format
	t := make(amqp.Table, record.OwnHeaders+len(e.Headers)+1)
	f.EachHeader(e, func(key string, v []byte) {
		if key == "id" && !f.IDHeaderOnly {
			return
		}
		if v == nil {
			t[key] = nil
			return
		}
		t[key] = string(v)
	})
	return t
}

// Publish queues e and returns; see sink.Sink. It never waits for the broker:
// events beyond MaxPending unconfirmed publishes wait in the sink. While the broker
// is unreachable, events queue up to MaxPending in all; beyond that Publish fails
// them at once with a broker-level error.
func (s *Sink) Publish(e *outbox.Event, done sink.Done) {
	m := &message{ev: e, done: done, exchange: s.exchange.Render(e), key: s.routingKey.Render(e)}
	if err := m.check(); err != nil {
		s.failSoon(m, &sink.EventError{Err: err})
		return
	}
	value, tombstone := s.cfg.Format.Value(e)
	m.pub = amqp.Publishing{
		Headers:      s.headers(e),
		ContentType:  "application/json",
		DeliveryMode: amqp.Persistent,
		MessageId:    e.ID,
		Timestamp:    e.CreatedAt,
		Type:         e.EventType,
		Body:         value,
	}
	if tombstone {
		m.pub.Headers["tombstone"] = true
	}
	s.mu.Lock()
	switch {
	case s.mu.closed:
		s.mu.Unlock()
		s.failSoon(m, errClosed)
		return
	case s.disconnectedLocked() && s.mu.pending.N() >= s.cfg.MaxPending:
		err := fmt.Errorf("%d events already wait for it: %w", s.mu.pending.N(), s.unavailableLocked())
		s.mu.Unlock()
		s.failSoon(m, err)
		return
	}
	s.mu.pending.Add(1)
	s.mu.queue = append(s.mu.queue, m)
	s.mu.Unlock()
	s.signal()
}

// check rejects what AMQP cannot carry: the names travel as short strings.
func (m *message) check() error {
	for _, f := range []struct{ what, v string }{
		{"exchange", m.exchange}, {"routing key", m.key},
		{"event id (message_id)", m.ev.ID}, {"event type (type)", m.ev.EventType},
	} {
		if len(f.v) > 255 {
			return fmt.Errorf("event %s: %s %.40q... is %d bytes, AMQP allows 255", m.ev.ID, f.what, f.v, len(f.v))
		}
	}
	return nil
}

// failSoon reports err for an event that never got queued. done runs on another
// goroutine so that Publish's caller never runs its own callback re-entrantly.
func (s *Sink) failSoon(m *message, err error) {
	s.mu.Lock()
	s.mu.pending.Add(1)
	s.mu.Unlock()
	go s.finish(m, err)
}

// finish calls done once and then counts the event out.
func (s *Sink) finish(m *message, err error) {
	if !m.settled.CompareAndSwap(false, true) {
		return
	}
	m.done.Done(err)
	s.mu.Lock()
	s.mu.pending.Add(-1)
	s.mu.Unlock()
}

// signal wakes the writer without blocking.
func (s *Sink) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// disconnectedLocked reports whether the sink has no working connection: it is
// reconnecting, or the current connection broke and the writer has not noticed yet.
func (s *Sink) disconnectedLocked() bool {
	return !s.mu.connected || s.mu.link == nil || s.mu.link.conn.IsClosed()
}

// unavailableLocked is the broker-level error while disconnected. s.mu is held.
func (s *Sink) unavailableLocked() error {
	if s.mu.lastErr != nil {
		return fmt.Errorf("rabbitmq at %s is unreachable; the sink keeps reconnecting: %w", s.addr, s.mu.lastErr)
	}
	return fmt.Errorf("rabbitmq at %s is unreachable; the sink keeps reconnecting", s.addr)
}

// Flush waits until done was called for every published event, or ctx ends.
func (s *Sink) Flush(ctx context.Context) error {
	if left, err := s.mu.pending.Wait(ctx, &s.mu); err != nil {
		return fmt.Errorf("flush rabbitmq sink: %d events without a confirm: %w", left, err)
	}
	return nil
}

// Ping checks that the connection is up and the broker answers on it (a channel
// opened and closed).
func (s *Sink) Ping(ctx context.Context) error {
	s.mu.Lock()
	l, disconnected, closed := s.mu.link, s.disconnectedLocked(), s.mu.closed
	unavailable := s.unavailableLocked()
	s.mu.Unlock()
	switch {
	case closed:
		return errClosed
	case disconnected:
		return unavailable
	}
	res := make(chan error, 1)
	go func() {
		ch, err := l.conn.Channel()
		if err == nil {
			err = ch.Close()
		}
		res <- err
	}()
	select {
	case err := <-res:
		if err != nil {
			return fmt.Errorf("ping rabbitmq at %s: %w", s.addr, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("ping rabbitmq at %s: %w", s.addr, ctx.Err())
	}
}

// Close closes the connection; events without a confirm fail with a broker-level
// error. Call Flush first to let them finish.
func (s *Sink) Close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.mu.closed = true
		l := s.mu.link
		s.mu.Unlock()
		close(s.stop)
		if l != nil {
			_ = l.conn.CloseDeadline(time.Now().Add(closeTimeout))
		}
		select {
		case <-s.runDone:
		case <-time.After(2 * closeTimeout):
			s.log.Warn("rabbitmq sink: connection loop did not stop in time")
		}
		s.mu.Lock()
		left := append(s.mu.inflight, s.mu.queue...)
		s.mu.inflight, s.mu.queue = nil, nil
		s.mu.Unlock()
		for _, m := range left {
			s.finish(m, errClosed)
		}
	})
}
