package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/walrelay/walrelay/catalog"
)

// Handler consumes the stream. HandleWAL gets each pgoutput message in stream order;
// data is valid only during the call. Tick is called every StatusInterval, before the
// confirmable LSN is computed, also while reading is paused. Drain waits until the
// events handed to the broker have settled, or ctx ends.
type Handler interface {
	HandleWAL(ctx context.Context, data []byte) error
	Tick(ctx context.Context) error
	Drain(ctx context.Context) error
}

// StreamConfig tunes a replication stream.
type StreamConfig struct {
	Slot        string
	Publication string
	// StatusInterval is how often the confirmable LSN is recomputed and, when it
	// moved, sent to the server.
	StatusInterval time.Duration
	// KeepaliveInterval is the longest time between two status updates, moved or
	// not; keep it well under the server's wal_sender_timeout.
	KeepaliveInterval time.Duration
	// ShutdownTimeout bounds a stop: reading on to the end of the open transaction,
	// then the wait for in-flight events.
	ShutdownTimeout time.Duration
	Logger          *slog.Logger
	// OnStart is called once replication started; OnConfirm after each status
	// update that moved the confirmed LSN. Both run on the stream's goroutine.
	OnStart   func()
	OnConfirm func(pglogrepl.LSN)
	// BeforeConfirm, when set, must pass before the confirmed LSN moves: a check
	// that starts once the LSN to confirm was received allows that LSN. It runs on a
	// goroutine of its own, one at a time, while the stream reads on; an error ends
	// the session without confirming.
	BeforeConfirm func(ctx context.Context) error
	// Messages asks pgoutput for logical decoding messages too (messages 'true',
	// PostgreSQL 14 and later): the table-less outbox's events.
	Messages bool
	// Pause, when set, holds reading while it is paused; status updates go on.
	// A stop reads on to the end of an open transaction paused or not.
	Pause *Pause
	// Start, when past the slot's confirmed position, is where streaming starts: the
	// server skips every transaction whose commit record begins before it, as it
	// does those before the slot's confirmed position. Zero: the slot's position.
	Start pglogrepl.LSN
}

// Stream starts replication from the slot's confirmed position, or cfg.Start, and
// feeds h until ctx ends or the session fails. It is the only user of the connection
// meanwhile: it reads messages, pauses reading while the window is full, and sends
// standby status updates with the watermark's confirmable LSN throughout. When ctx ends it reads on
// to the end of the open transaction, if any, drains h, sends the final confirmable
// LSN and returns nil, all within ShutdownTimeout.
func (c *Conn) Stream(ctx context.Context, cfg StreamConfig, wm *Watermark, h Handler) error {
	args := []string{"proto_version '1'", fmt.Sprintf("publication_names '%s'", cfg.Publication)}
	if cfg.Messages {
		if major := c.ServerMajor(); major < MessagesMajor {
			return &catalog.SetupError{Msg: fmt.Sprintf("PostgreSQL %d cannot stream logical messages (PostgreSQL %d and later can); "+
				"upgrade, or turn the table-less outbox off (--messages-prefix '')", major, MessagesMajor)}
		}
		args = append(args, "messages 'true'")
	}
	err := pglogrepl.StartReplication(ctx, c.pg, cfg.Slot, cfg.Start, pglogrepl.StartReplicationOptions{PluginArgs: args})
	if err != nil {
		return fmt.Errorf("start replication on slot %s: %w", cfg.Slot, err)
	}
	if cfg.OnStart != nil {
		cfg.OnStart()
	}
	netConn := c.pg.Conn()
	s := &stream{conn: c, cfg: cfg, wm: wm, h: h, netConn: netConn, batch: newReadBatching(netConn)}
	s.check.allowed = wm.Confirmable() // the start: confirmed already
	defer s.check.stop()
	return s.run(ctx)
}

type stream struct {
	conn    *Conn
	netConn net.Conn
	cfg     StreamConfig
	wm      *Watermark
	h       Handler
	batch   *readBatching

	sent       pglogrepl.LSN // last confirmed LSN sent
	lastSentAt time.Time
	check      confirmCheck

	idle       bool      // the read waits for the next keepalive (standingBy)
	fullSince  time.Time // when reading last paused on a full window
	lastWarnAt time.Time

	// held is a message the handler held (Held), to hand again once heldBy is
	// resumed; nil: none.
	held   []byte
	heldBy *Pause
}

// fullWarnAfter is how long the window may stay full before operators are told.
const fullWarnAfter = 10 * time.Second

func (s *stream) run(ctx context.Context) error {
	// Reads use a socket deadline rather than a context per message: cheaper on the hot
	// path, and the deadline doubles as the status-update timer. Cancellation pulls the
	// deadline in so a blocked read returns at once.
	stopWatch := context.AfterFunc(ctx, func() { _ = s.netConn.SetReadDeadline(time.Now()) })
	defer stopWatch()
	defer s.netConn.SetReadDeadline(time.Time{})
	defer s.batch.set(false)

	// The clock is read after a read timed out, after waiting for room, and every
	// clockEvery messages otherwise; the deadline is set only when it moves. Both
	// cost more per message than decoding an insert does.
	const clockEvery = 32
	clock := time.Now()
	nextStatus := clock.Add(s.cfg.StatusInterval)
	s.batch.windowStart = clock
	want := s.batch.deadline(clock, nextStatus) // the read deadline for the clock reading
	var deadline time.Time
	sinceClock := 0
	// live is ctx until it ends; then, while a transaction is open, a context bounded
	// by the shutdown timeout in which the stream reads on to its commit.
	live := ctx
	var stopBy time.Time
	for {
		if err := s.wm.Err(); err != nil {
			return err
		}
		if live.Err() != nil {
			if stopBy.IsZero() {
				stopBy = time.Now().Add(s.cfg.ShutdownTimeout)
				if s.wm.open != nil {
					var cancel context.CancelFunc
					live, cancel = context.WithDeadline(context.Background(), stopBy)
					defer cancel()
					deadline = time.Time{} // ctx's end pulled the socket deadline in
					s.cfg.Logger.Info("stopping: reading on to the end of the open transaction, so that its events can be confirmed",
						"slot", s.cfg.Slot, "within", time.Until(stopBy).Round(time.Millisecond).String())
					continue
				}
			} else if s.wm.open != nil {
				s.cfg.Logger.Warn("stopping before the open transaction ended: the shutdown timeout ran out; "+
					"its events published so far will be published again on the next start", "slot", s.cfg.Slot)
			}
			return s.shutdown(stopBy)
		}
		if !stopBy.IsZero() && s.wm.open == nil {
			return s.shutdown(stopBy) // the open transaction committed
		}
		if sinceClock >= clockEvery {
			sinceClock = 0
			clock = time.Now()
			s.observeRate(clock)
			if !clock.Before(nextStatus) {
				if err := s.h.Tick(ctx); err != nil {
					return err
				}
				if err := s.sendStatus(false); err != nil {
					return err
				}
				nextStatus = clock.Add(s.cfg.StatusInterval)
				if s.idle = s.standingBy(); s.idle {
					// Nothing can move the confirmable LSN before a message comes, and a
					// message ends the wait: wake for the next keepalive only.
					if k := s.lastSentAt.Add(s.cfg.KeepaliveInterval); k.After(nextStatus) {
						nextStatus = k
					}
				}
			}
			want = s.batch.deadline(clock, nextStatus)
		}
		if s.held != nil {
			if !stopBy.IsZero() {
				s.cfg.Logger.Warn("stopping while a message is held for its schema: the open transaction's events "+
					"published so far will be published again on the next start", "slot", s.cfg.Slot)
				return s.shutdown(stopBy)
			}
			if s.heldBy.Paused() {
				s.heldBy.Wait(live, nextStatus)
				sinceClock = clockEvery // status updates are due on time
				continue
			}
			data := s.held
			s.held = nil
			if err := s.hand(live, data); err != nil {
				return err
			}
			continue
		}
		if s.cfg.Pause != nil && stopBy.IsZero() && s.cfg.Pause.Paused() {
			s.cfg.Pause.Wait(live, nextStatus)
			sinceClock = clockEvery // the clock moved: status updates are due on time
			continue
		}
		if s.wm.window.Full() {
			s.warnIfStuck()
			s.wm.window.Wait(live, nextStatus)
			sinceClock = clockEvery
			continue
		}
		s.fullSince = time.Time{}
		if want != deadline {
			_ = s.netConn.SetReadDeadline(want)
			deadline = want
		}
		if s.check.passed() {
			// What a crash repeats is what was delivered past the confirmed LSN:
			// confirm what the check allows now, not a status interval later.
			if err := s.confirmChecked(); err != nil {
				return err
			}
		}
		msg, err := s.conn.pg.ReceiveMessage(context.Background())
		if err != nil {
			if pgconn.Timeout(err) {
				sinceClock = clockEvery
				if !stopBy.IsZero() {
					deadline = time.Time{} // ctx's end may have pulled the deadline in after we set it
				}
				continue
			}
			return fmt.Errorf("receive replication message: %w", err)
		}
		sinceClock++
		if s.idle {
			// Back to the status interval, from this message on.
			s.idle = false
			nextStatus = time.Now().Add(s.cfg.StatusInterval)
			sinceClock = clockEvery
		}
		if err := s.handle(live, msg); err != nil {
			return err
		}
	}
}

// observeRate lets read batching follow the arrival rate, and says so at debug level
// when the mode changes (rarely: the rate has to change a lot).
func (s *stream) observeRate(now time.Time) {
	was := s.batch.on
	s.batch.observe(now)
	if s.batch.on != was && s.cfg.Logger.Enabled(context.Background(), slog.LevelDebug) {
		s.cfg.Logger.Debug("read batching", "on", s.batch.on, "slot", s.cfg.Slot)
	}
}

// standingBy reports whether the stream may sleep until the next keepalive: every
// transaction received is settled and confirmed, and no check runs whose passing
// would allow more. Acks, a check passing and the server's position all follow a
// message, so only a message can change that.
func (s *stream) standingBy() bool {
	return s.wm.Idle() && !s.check.running && s.sent == s.wm.Confirmable() && !s.batch.on
}

func (s *stream) warnIfStuck() {
	now := time.Now()
	if s.fullSince.IsZero() {
		s.fullSince = now
		return
	}
	if now.Sub(s.fullSince) < fullWarnAfter || now.Sub(s.lastWarnAt) < 3*fullWarnAfter {
		return
	}
	s.lastWarnAt = now
	events, bytes := s.wm.window.InFlight()
	s.cfg.Logger.Warn("in-flight window full: waiting for broker acks; the slot keeps WAL meanwhile. "+
		"Check that the brokers are up and reachable",
		"since", s.fullSince.UTC().Format(time.RFC3339), "events_in_flight", events, "bytes_in_flight", bytes,
		"confirmed_lsn", s.sent.String())
}

func (s *stream) handle(ctx context.Context, msg pgproto3.BackendMessage) error {
	switch msg := msg.(type) {
	case *pgproto3.CopyData:
		s.batch.received(len(msg.Data))
		if len(msg.Data) == 0 {
			return errors.New("empty replication message")
		}
		switch msg.Data[0] {
		case pglogrepl.XLogDataByteID:
			xld, err := pglogrepl.ParseXLogData(msg.Data[1:])
			if err != nil {
				return fmt.Errorf("parse xlog data: %w", err)
			}
			s.wm.Received(xld.WALStart)
			return s.hand(ctx, xld.WALData)
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(msg.Data[1:])
			if err != nil {
				return fmt.Errorf("parse keepalive: %w", err)
			}
			s.wm.ServerPosition(ka.ServerWALEnd)
			if ka.ReplyRequested {
				return s.sendStatus(true)
			}
		}
		return nil
	case *pgproto3.ErrorResponse:
		return fmt.Errorf("replication stream: %w", pgconn.ErrorResponseToPgError(msg))
	case *pgproto3.CopyDone:
		return errors.New("replication stream: server ended the stream")
	default:
		return nil
	}
}

// sendStatus sends a standby status update when the confirmable LSN moved (as far
// as a passed BeforeConfirm allows), when the keepalive interval passed, or when
// forced (the server asked for a reply).
func (s *stream) sendStatus(force bool) error {
	lsn := s.wm.Confirmable()
	if s.cfg.BeforeConfirm != nil {
		var err error
		if lsn, err = s.check.allow(lsn, s.cfg.BeforeConfirm); err != nil {
			return err
		}
	}
	return s.send(lsn, force)
}

// confirmChecked sends the status update a check that just passed allows.
func (s *stream) confirmChecked() error {
	lsn, err := s.check.allowNow(s.wm.Confirmable())
	if err != nil {
		return err
	}
	return s.send(lsn, false)
}

// send sends lsn as the confirmed position when it moved, when the keepalive
// interval passed, or when forced.
func (s *stream) send(lsn pglogrepl.LSN, force bool) error {
	if !force && lsn == s.sent && time.Since(s.lastSentAt) < s.cfg.KeepaliveInterval {
		return nil
	}
	// Written is reported as the confirmed LSN too: a caught-up walsender sends a
	// keepalive only while the written position lags its own, and those keepalives
	// are what lets an idle slot advance.
	err := pglogrepl.SendStandbyStatusUpdate(context.Background(), s.conn.pg, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: lsn,
		WALFlushPosition: lsn,
		WALApplyPosition: lsn,
	})
	if err != nil {
		return fmt.Errorf("send standby status (confirm %s): %w", lsn, err)
	}
	if lsn != s.sent {
		if s.cfg.OnConfirm != nil {
			s.cfg.OnConfirm(lsn)
		}
		if s.cfg.Logger.Enabled(context.Background(), slog.LevelDebug) {
			s.cfg.Logger.Debug("confirmed lsn", "lsn", lsn.String())
		}
	}
	s.sent = lsn
	s.lastSentAt = time.Now()
	return nil
}

// shutdown drains in-flight events until stopBy while still answering the server,
// then sends the final confirmable LSN (docs/design.md invariant 6).
func (s *stream) shutdown(stopBy time.Time) error {
	_ = s.netConn.SetReadDeadline(time.Time{})
	ctx, cancel := context.WithDeadline(context.Background(), stopBy)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.h.Drain(ctx) }()
	ticker := time.NewTicker(s.cfg.StatusInterval)
	defer ticker.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				s.cfg.Logger.Warn("stopping with events still in flight; they will be streamed again on the next start",
					"err", err)
			}
			if s.cfg.BeforeConfirm != nil {
				if err := s.check.finish(s.wm.Confirmable(), s.cfg.BeforeConfirm); err != nil {
					return err
				}
			}
			if err := s.sendStatus(true); err != nil {
				return err
			}
			s.cfg.Logger.Info("replication stopped", "slot", s.cfg.Slot, "confirmed_lsn", s.sent.String())
			return nil
		case <-ticker.C:
			if err := s.sendStatus(false); err != nil {
				return err
			}
		}
	}
}
