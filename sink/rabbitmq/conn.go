package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/walrelay/walrelay/internal/backoff"
	"github.com/walrelay/walrelay/internal/redact"
	"github.com/walrelay/walrelay/sink"
)

// Goroutines: run owns the connection and, through serveConn and serveChannel, is
// the only writer on the current channel; one listen goroutine per channel reads
// its confirms, returns and close. They share the Sink's queue and in-flight list
// under s.mu.

const (
	dialTimeout = 10 * time.Second
	// maxSoftStreak channel exceptions in a row without a confirm make the sink drop
	// the connection and back off instead of reopening channels at once.
	maxSoftStreak = 8
)

// link is one connection.
type link struct {
	conn  *amqp.Connection
	known map[string]bool // exchanges declared or seen to exist on this connection; writer only
}

// channelState is one confirm-mode channel with its listeners.
type channelState struct {
	ch       *amqp.Channel
	confirms chan amqp.Confirmation
	returns  chan amqp.Return
	closes   chan *amqp.Error
	ended    chan struct{} // closed by listen once the channel is gone
	closeErr *amqp.Error   // why; nil on a clean close. Written before ended is closed.
}

// dial connects and opens a confirm channel.
func (s *Sink) dial() (*link, *channelState, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName("walrelay")
	conn, err := amqp.DialConfig(s.cfg.URL, amqp.Config{
		Properties: props,
		Dial: func(network, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: dialTimeout}
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// A deadline for the TLS and AMQP handshakes; amqp091 clears it afterwards.
			if err := c.SetDeadline(time.Now().Add(dialTimeout)); err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		},
	})
	if err != nil {
		return nil, nil, redact.Error(fmt.Errorf("connect to rabbitmq at %s (is it running, and are the user, password and vhost right?): %w",
			s.addr, err), s.cfg.URL)
	}
	cs, err := s.openChannel(conn)
	if err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	return &link{conn: conn, known: map[string]bool{}}, cs, nil
}

// openChannel opens a channel with its listeners registered, then confirm mode.
func (s *Sink) openChannel(conn *amqp.Connection) (*channelState, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open rabbitmq channel: %w", err)
	}
	cs := &channelState{
		ch: ch,
		// amqp091 drops a notification a listener does not take within 5s; the
		// window keeps confirms below this capacity, and listen drains returns.
		confirms: ch.NotifyPublish(make(chan amqp.Confirmation, s.cfg.MaxPending+1)),
		returns:  ch.NotifyReturn(make(chan amqp.Return, 64)),
		closes:   ch.NotifyClose(make(chan *amqp.Error, 1)),
		ended:    make(chan struct{}),
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("put rabbitmq channel in confirm mode: %w", err)
	}
	return cs, nil
}

// run keeps a connection up until Close: it serves one, and when it is lost
// reconnects with capped, jittered exponential backoff.
func (s *Sink) run(l *link, cs *channelState) {
	defer close(s.runDone)
	retry := backoff.New(s.cfg.ReconnectMin, s.cfg.ReconnectMax)
	var wait time.Duration
	for {
		if l != nil {
			up := time.Now()
			err := s.serveConn(l, cs)
			cs = nil
			_ = l.conn.CloseDeadline(time.Now().Add(closeTimeout))
			s.mu.Lock()
			closed := s.mu.closed
			s.mu.link, s.mu.connected, s.mu.lastErr = nil, false, err
			progress := s.mu.progress
			s.mu.progress = false
			waiting := len(s.mu.queue)
			s.mu.Unlock()
			if closed {
				return
			}
			if progress || time.Since(up) > s.cfg.ReconnectMax {
				retry.Reset()
			}
			wait = retry.Next()
			s.log.Warn("rabbitmq connection lost; reconnecting, events without a confirm will be published again",
				"addr", s.addr, "err", err, "waiting", waiting, "retry_in", wait.Round(time.Millisecond).String())
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-s.stop:
			timer.Stop()
			return
		}

		var err error
		l, cs, err = s.dial()
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			if l != nil {
				_ = l.conn.Close()
			}
			return
		}
		if err != nil {
			s.mu.lastErr = err
			s.mu.Unlock()
			wait = retry.Next()
			s.log.Warn("rabbitmq still unreachable", "err", err, "retry_in", wait.Round(time.Millisecond).String())
			l = nil
			continue
		}
		s.mu.link, s.mu.connected, s.mu.lastErr, s.mu.softStreak = l, true, nil, 0
		waiting := len(s.mu.queue)
		s.mu.Unlock()
		s.log.Info("rabbitmq reconnected", "addr", s.addr, "waiting", waiting)
	}
}

// serveConn serves channels on l until the connection is gone or the sink closes;
// a channel closed by a channel exception is replaced at once.
func (s *Sink) serveConn(l *link, cs *channelState) error {
	for {
		if cs == nil {
			var err error
			if cs, err = s.openChannel(l.conn); err != nil {
				return err
			}
		}
		s.signal()
		closeErr := s.serveChannel(l, cs)
		cs = nil
		s.mu.Lock()
		closed, streak := s.mu.closed, s.mu.softStreak
		s.mu.Unlock()
		switch {
		case closed:
			return errClosed
		case l.conn.IsClosed():
			if closeErr == nil {
				return errors.New("connection closed")
			}
			return closeErr
		case streak > maxSoftStreak:
			if closeErr == nil {
				closeErr = errors.New("channel closed")
			}
			return fmt.Errorf("%d channels closed in a row without a confirm, the last: %w", streak, closeErr)
		}
		if closeErr != nil {
			s.log.Warn("rabbitmq closed the channel; opening a new one", "addr", s.addr, "err", closeErr)
		}
	}
}

// serveChannel publishes queued events on cs until the channel is gone, then puts
// the unconfirmed ones back at the head of the queue. It returns why the channel
// closed (nil on a clean close).
func (s *Sink) serveChannel(l *link, cs *channelState) error {
	go s.listen(cs)
	for {
		m := s.next()
		if m == nil {
			select {
			case <-s.wake:
			case <-cs.ended:
				return s.endChannel(l, cs)
			}
			continue
		}
		if err := s.ensureExchange(l, m.exchange); err != nil {
			if sink.IsEventError(err) {
				if s.dropHead(m) {
					s.finish(m, err)
				}
				continue
			}
			// The connection failed under the check: replace it.
			_ = l.conn.CloseDeadline(time.Now().Add(closeTimeout))
			<-cs.ended
			return s.endChannel(l, cs)
		}
		// Only this goroutine publishes on cs, so the next tag is this event's, and
		// it is in flight before its confirm can arrive.
		if !s.toInflight(m, cs.ch.GetNextPublishSeqNo()) {
			continue
		}
		if _, err := cs.ch.PublishWithDeferredConfirm(m.exchange, m.key, s.cfg.Mandatory, false, m.pub); err != nil {
			// Nothing went out (amqp091 took the tag back); the channel or the
			// connection is failing. Close the channel in case it is not, and let
			// endChannel requeue.
			s.unsend(m)
			_ = cs.ch.Close()
			<-cs.ended
			return s.endChannel(l, cs)
		}
	}
}

// next returns the event to publish now, or nil: the window is full, or a suspect
// is in flight or next (suspects travel alone, so that the one a channel exception
// is about can be told from the others).
func (s *Sink) next() *message {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed || len(s.mu.queue) == 0 {
		return nil
	}
	head, n := s.mu.queue[0], len(s.mu.inflight)
	if n >= s.cfg.MaxPending || n > 0 && (head.suspect || s.mu.inflight[n-1].suspect) {
		return nil
	}
	return head
}

// toInflight moves m, the head of the queue, to the in-flight list with its tag.
func (s *Sink) toInflight(m *message, tag uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed || len(s.mu.queue) == 0 || s.mu.queue[0] != m {
		return false
	}
	s.mu.queue[0] = nil
	s.mu.queue = s.mu.queue[1:]
	m.tag = tag
	s.mu.inflight = append(s.mu.inflight, m)
	return true
}

// unsend moves m, whose publish failed, from the tail of the in-flight list back
// to the head of the queue.
func (s *Sink) unsend(m *message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.mu.inflight); n > 0 && s.mu.inflight[n-1] == m {
		s.mu.inflight[n-1] = nil
		s.mu.inflight = s.mu.inflight[:n-1]
		m.tag = 0
		s.mu.queue = append([]*message{m}, s.mu.queue...)
	}
}

// dropHead removes m from the head of the queue.
func (s *Sink) dropHead(m *message) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.mu.queue) == 0 || s.mu.queue[0] != m {
		return false
	}
	s.mu.queue[0] = nil
	s.mu.queue = s.mu.queue[1:]
	return true
}

// listen settles confirms in delivery-tag order until the channel closes. A
// basic.return reaches amqp091 before the ack of the same message, and is handed
// to the returns listener before the ack to the confirms listener, so draining
// returns before settling an ack sees it.
func (s *Sink) listen(cs *channelState) {
	returned := map[string][]amqp.Return{} // by message id
	returns := cs.returns
	drain := func() {
		for returns != nil {
			select {
			case r, ok := <-returns:
				if !ok {
					returns = nil
					return
				}
				returned[r.MessageId] = append(returned[r.MessageId], r)
			default:
				return
			}
		}
	}
	for {
		select {
		case r, ok := <-returns:
			if !ok {
				returns = nil
				continue
			}
			returned[r.MessageId] = append(returned[r.MessageId], r)
		case c, ok := <-cs.confirms:
			if !ok {
				// amqp091 sends the close reason before it closes the listeners.
				select {
				case cs.closeErr = <-cs.closes:
				default:
				}
				close(cs.ended)
				return
			}
			drain()
			s.settle(cs, c, returned)
		}
	}
}

// settle reports the outcome of the oldest in-flight event.
func (s *Sink) settle(cs *channelState, c amqp.Confirmation, returned map[string][]amqp.Return) {
	s.mu.Lock()
	if len(s.mu.inflight) == 0 || s.mu.inflight[0].tag != c.DeliveryTag {
		// Only after Close took the events over; anything else is a bug, and closing
		// the channel makes every in-flight event go out again rather than be lost.
		closed := s.mu.closed
		s.mu.Unlock()
		if !closed {
			s.log.Error("rabbitmq sink: confirm for an unknown delivery tag; reopening the channel", "delivery_tag", c.DeliveryTag)
			go cs.ch.Close()
		}
		return
	}
	m := s.mu.inflight[0]
	s.mu.inflight[0] = nil
	s.mu.inflight = s.mu.inflight[1:]
	s.mu.progress = true
	s.mu.softStreak = 0
	s.mu.Unlock()

	var err error
	switch rs := returned[m.ev.ID]; {
	case !c.Ack:
		err = &sink.EventError{Err: fmt.Errorf("rabbitmq nacked event %s (exchange %q, routing key %q): a queue refused it "+
			"(max-length with overflow reject-publish?) or the broker failed to store it", m.ev.ID, m.exchange, m.key)}
	case len(rs) > 0:
		r := rs[0]
		if len(rs) == 1 {
			delete(returned, m.ev.ID)
		} else {
			returned[m.ev.ID] = rs[1:]
		}
		err = &sink.EventError{Err: fmt.Errorf("rabbitmq returned event %s: exchange %q routes routing key %q to no queue; "+
			"bind a queue for it (or publish with Mandatory false to drop such events): %w",
			m.ev.ID, m.exchange, m.key, &amqp.Error{Code: int(r.ReplyCode), Reason: r.ReplyText, Server: true})}
	}
	s.finish(m, err)
	s.signal()
}

// endChannel runs once listen saw the channel close. Every in-flight event goes
// back to the head of the queue, except the one a channel exception is about: a
// channel exception comes from one publish, so when a single event was in flight
// it is that event's failure. With more in flight, they become suspects and are
// published again one at a time; after 404 NOT_FOUND the exchange checks find the
// missing exchange first.
func (s *Sink) endChannel(l *link, cs *channelState) error {
	e := cs.closeErr
	soft := e != nil && e.Recover && !l.conn.IsClosed()
	if soft && e.Code == amqp.NotFound {
		clear(l.known)
	}
	s.mu.Lock()
	in := s.mu.inflight
	s.mu.inflight = nil
	var culprit *message
	if !soft && e == nil && !s.mu.closed && !l.conn.IsClosed() {
		// Only our own error paths close a channel cleanly: no progress either.
		s.mu.softStreak++
	}
	if soft && !s.mu.closed {
		switch {
		case len(in) == 1:
			culprit, in = in[0], nil
		case len(in) > 1 && (e.Code != amqp.NotFound || s.mu.softStreak > 0):
			for _, m := range in {
				m.suspect = true
			}
		}
		if culprit != nil {
			s.mu.softStreak = 0
		} else {
			s.mu.softStreak++
		}
	}
	for _, m := range in {
		m.tag = 0
	}
	s.mu.queue = append(in, s.mu.queue...)
	s.mu.Unlock()
	if culprit != nil {
		s.finish(culprit, &sink.EventError{Err: fmt.Errorf("rabbitmq refused event %s (exchange %q, routing key %q) and closed the channel: %w",
			culprit.ev.ID, culprit.exchange, culprit.key, e)})
	}
	if e == nil {
		return nil
	}
	return e
}

// ensureExchange declares the exchange, or checks that it exists, once per
// connection, on a channel of its own: a failed declare closes its channel. A
// refusal of the broker (not found, access refused, declared with another type) is
// the event's own failure; any other error is the connection's.
func (s *Sink) ensureExchange(l *link, name string) error {
	if name == "" || l.known[name] {
		return nil // "" is the default exchange, which always exists
	}
	ch, err := l.conn.Channel()
	if err != nil {
		return fmt.Errorf("open rabbitmq channel: %w", err)
	}
	// Names starting with amq. are reserved for the broker's own exchanges, which
	// exist and cannot be declared.
	if s.cfg.DeclareExchange && !strings.HasPrefix(name, "amq.") {
		err = ch.ExchangeDeclare(name, amqp.ExchangeTopic, true, false, false, false, nil)
	} else {
		err = ch.ExchangeDeclarePassive(name, amqp.ExchangeTopic, true, false, false, false, nil)
	}
	var ae *amqp.Error
	switch {
	case err == nil:
		l.known[name] = true
		_ = ch.Close()
		return nil
	case errors.As(err, &ae) && ae.Recover && !l.conn.IsClosed():
		hint := ""
		switch {
		case ae.Code == amqp.NotFound:
			hint = "; declare it, or set DeclareExchange"
		case ae.Code == amqp.PreconditionFailed:
			hint = "; it exists with another type or flags than a durable topic exchange"
		}
		return &sink.EventError{Err: fmt.Errorf("rabbitmq exchange %q%s: %w", name, hint, err)}
	default:
		_ = ch.Close()
		return fmt.Errorf("check rabbitmq exchange %q: %w", name, err)
	}
}
