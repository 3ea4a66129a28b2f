package relay

import (
	"context"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// session runs one replication session: preflight checks, the slot (created with a
// catch-up pass when new), then the stream until ctx ends or something fails.
func (r *Relay) session(ctx context.Context, snk sink.Sink, bk *poller.Bookkeeper) error {
	defer func() {
		r.active.Store(false)
		r.metrics.leader.Set(0)
	}()
	// conn keeps the books; slots is where the slot lives: a second connection when
	// that is a standby (docs/postgresql.md, "Decoding on a standby"), which is
	// asked first, so that a promotion is news even when the primary is gone.
	var slots *pgx.Conn
	if r.onStandby {
		var err error
		if slots, err = r.connect(ctx); err != nil {
			return errorf("connect to the standby", err)
		}
		defer slots.Close(context.Background())
		if err := r.checkStillStandby(ctx, slots); err != nil {
			return err
		}
	}
	conn, err := r.connectBooks(ctx)
	if err != nil {
		return errorf("connect to postgresql", err)
	}
	defer conn.Close(context.Background())
	if slots == nil {
		slots = conn
	}

	st, err := catalog.PreflightStandby(ctx, conn, slots, r.catalogTables(), r.cfg.Publication, r.cfg.Slot)
	if err != nil {
		return err
	}
	// Before anything is created: a table another slot streams is refused.
	claim, err := catalog.ClaimTables(ctx, conn, r.cfg.Slot, r.tableNames())
	if err != nil {
		return err
	}
	rc, err := replication.ConnectWithPassword(ctx, r.target, r.cfg.DatabasePassword)
	if err != nil {
		return err
	}
	defer rc.Close()

	slotAt, created, err := r.prepareSlot(ctx, conn, slots, rc, snk, bk, st, claim)
	if err != nil {
		return err
	}
	here, serverAt, err := rc.Identify(ctx, r.cfg.Slot, created)
	if err != nil {
		return err
	}
	start, err := r.resumeFrom(ctx, conn, rc, here, serverAt, slotAt)
	if err != nil {
		return err
	}
	var startPast pglogrepl.LSN // where streaming starts, when past the slot's position
	if start > slotAt {
		startPast = start
	}
	// The connection stays open for the table checks before each confirmation.
	names := make([]string, len(r.tables))
	decTables := make([]decoder.Table, len(r.tables))
	for i, t := range r.tables {
		names[i] = t.Table
		decTables[i] = decoder.Table{Schema: t.shape.Schema, Name: t.shape.Name, Columns: t.Columns}
	}
	watch, err := catalog.WatchTables(ctx, conn, names, r.cfg.Publication, r.cfg.Slot)
	if err != nil {
		return err
	}

	keepalive := r.cfg.KeepaliveInterval
	if senderTimeout, err := rc.SenderTimeout(ctx); err != nil {
		return err
	} else if senderTimeout > 0 && senderTimeout/3 < keepalive {
		keepalive = max(senderTimeout/3, r.cfg.StatusInterval)
	}

	wm := replication.NewWatermark(r.window, start)
	pub := r.publisher(snk, bk)
	var d delivery = atLeastOnce{pub}
	if r.cfg.Delivery == ExactlyOnce {
		eo, closeTx, err := r.openExactlyOnce(ctx, rc, created, pub)
		if err != nil {
			return err
		}
		defer closeTx()
		d = eo
	}
	var rec *progress
	if r.cfg.OnPublish == poller.Progress {
		rec = r.newProgress(created)
		// Stopped once Stream returned, not with ctx: its final confirmation comes after.
		recCtx, stopRec := context.WithCancel(context.WithoutCancel(ctx))
		recDone := make(chan struct{})
		go func() { rec.Run(recCtx, r.log.Warn); close(recDone) }()
		defer func() { stopRec(); <-recDone }() // after Stream returned: its last confirmation is in
	}
	cr := r.newConfirmedRecord(here)
	if cr != nil {
		// Stopped once Stream returned, like the progress recorder: the final
		// confirmation comes after ctx ends.
		crCtx, stopCR := context.WithCancel(context.WithoutCancel(ctx))
		crDone := make(chan struct{})
		go func() { cr.Run(crCtx); close(crDone) }()
		defer func() { stopCR(); <-crDone }()
	}
	dec := decoder.NewTables(decTables)
	if r.cfg.MessagePrefix != "" {
		dec.DecodeMessages(r.cfg.MessagePrefix)
	}
	h := &pipeline{dec: dec, wm: wm, d: d, tables: r.tables, onOutsideMessage: r.outsideMessage}
	if r.schemas != nil {
		h.schemas = &schemaHold{r: r.schemas}
	}
	if rec != nil {
		h.rows = &rec.rows
	}
	h.backlog = r.newBacklog(ctx, slots, start)
	var eventsConfirmed eventConfirmations
	r.log.Info("streaming", "slot", r.cfg.Slot, "publication", r.cfg.Publication, "tables", r.tableNames(),
		"from_lsn", start.String())
	return rc.Stream(ctx, replication.StreamConfig{
		Slot:              r.cfg.Slot,
		Publication:       r.cfg.Publication,
		StatusInterval:    r.cfg.StatusInterval,
		KeepaliveInterval: keepalive,
		ShutdownTimeout:   r.cfg.ShutdownTimeout,
		Logger:            r.log,
		OnStart: func() {
			r.active.Store(true)
			r.metrics.leader.Set(1)
			if r.cfg.OnStream != nil {
				r.cfg.OnStream()
			}
		},
		OnConfirm: func(lsn pglogrepl.LSN) {
			r.metrics.confirmedLSN.Set(float64(lsn))
			r.metrics.lastConfirm.SetToCurrentTime()
			events := eventsConfirmed.confirmed(lsn, wm.EventsSettled())
			if events {
				r.metrics.eventsConfirmed.SetToCurrentTime()
				now := time.Now().UTC()
				r.eventsConfirmedAt.Store(&now)
			}
			if rec != nil {
				rec.confirmed(lsn)
			}
			if cr != nil {
				cr.confirmed(lsn, events)
			}
		},
		BeforeConfirm: func(ctx context.Context) error {
			if err := watch.Check(ctx, conn); err != nil {
				return err
			}
			if err := r.checkStillStandby(ctx, slots); err != nil {
				return err
			}
			return r.awaitBooksOnStandby(ctx, conn, slots)
		},
		Messages: r.cfg.MessagePrefix != "",
		Pause:    &r.pause,
		Start:    startPast,
	}, wm, h)
}
