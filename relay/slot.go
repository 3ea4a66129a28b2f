package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// prepareSlot makes the slot ready to stream and returns where streaming starts and
// when walrelay created the slot: as it is, or created (again) with a catch-up pass
// when it is missing, lost, or its last pass did not finish. A slot that had to be
// replaced is news (docs/design.md invariant 9).
func (r *Relay) prepareSlot(ctx context.Context, conn *pgx.Conn, rc *replication.Conn, snk sink.Sink, bk *poller.Bookkeeper,
	st replication.SlotState) (pglogrepl.LSN, time.Time, error) {
	here, _, err := rc.Identify(ctx, r.cfg.Slot, st.Created)
	if err != nil {
		return 0, time.Time{}, err
	}
	start, created := st.Confirmed, st.Created
	switch {
	case st.Lost():
		r.slotReplaced(ctx, conn, "the slot was invalidated (wal_status = lost): PostgreSQL removed WAL it still needed, "+
			"usually because max_slot_wal_keep_size was exceeded while the relay was down or stuck")
		if err := rc.DropSlot(ctx, r.cfg.Slot); err != nil {
			return 0, time.Time{}, err
		}
		start, created, err = r.createSlot(ctx, conn, rc, snk, bk)
	case !st.Exists && st.CatchupState == replication.CatchupDone:
		r.slotReplaced(ctx, conn, missingSlotReason(st.StreamedOn, here))
		start, created, err = r.createSlot(ctx, conn, rc, snk, bk)
	case !st.Exists:
		start, created, err = r.createSlot(ctx, conn, rc, snk, bk)
	case st.CatchupState == replication.CatchupPending:
		r.log.Warn("the slot's catch-up pass did not finish last time; creating the slot again", "slot", r.cfg.Slot)
		if err := rc.DropSlot(ctx, r.cfg.Slot); err != nil {
			return 0, time.Time{}, err
		}
		start, created, err = r.createSlot(ctx, conn, rc, snk, bk)
	default:
		r.checkFailover(ctx, conn, rc, st)
	}
	if err != nil {
		return 0, time.Time{}, err
	}
	if err := replication.RecordStreamed(ctx, conn, here); err != nil {
		return 0, time.Time{}, err
	}
	return start, created, nil
}

// missingSlotReason tells why a slot walrelay streamed before is gone, from where it
// last streamed it and where it is now.
func missingSlotReason(before replication.Streamed, here replication.Origin) string {
	switch {
	case before.System == "":
		return "the slot disappeared (dropped by someone or something)"
	case before.System != here.System:
		return fmt.Sprintf("the slot disappeared: this is another database cluster (system identifier %s, "+
			"the slot streamed on %s), a restore or a copy, and slots do not come along", here.System, before.System)
	case here.Timeline > before.Timeline:
		return fmt.Sprintf("the slot did not survive a failover: the server is on timeline %d, the slot streamed on "+
			"timeline %d, and the promoted standby had no copy of the slot (failover slots need PostgreSQL 17+, "+
			"slot-failover and sync_replication_slots on the standby)", here.Timeline, before.Timeline)
	}
	return "the slot disappeared (dropped by someone or something)"
}

// slotReplaced reports loudly that a slot is being replaced and what that means for
// delivery, counts it, and records it for `walrelay status`.
func (r *Relay) slotReplaced(ctx context.Context, conn *pgx.Conn, why string) {
	r.metrics.slotsReplaced.Inc()
	msg := "replication slot lost; creating a new one and publishing every row not marked processed " +
		"(some may be published again)"
	if r.cfg.OnPublish == poller.Progress {
		msg = "replication slot lost; creating a new one and publishing every row neither marked processed nor " +
			"below the published horizon the lost slot recorded (the events of about the last progress interval " +
			"may be published again)"
	}
	if r.cfg.OnPublish == poller.None {
		msg = "replication slot lost; creating a new one. With --on-publish none the table does not say " +
			"which rows were published: events committed while the slot was lost MAY BE LOST; " +
			"failover slots (PostgreSQL 17+) or --on-publish mark avoid it"
	}
	r.log.Error(msg, "slot", r.cfg.Slot, "why", why)
	if err := replication.RecordReplaced(ctx, conn, r.cfg.Slot, why); err != nil {
		r.log.Warn("could not record the slot's replacement for walrelay status", "err", err)
	}
}

// checkFailover warns about what would lose the slot, or events, at a failover on a
// server that has failover slots.
func (r *Relay) checkFailover(ctx context.Context, conn *pgx.Conn, rc *replication.Conn, st replication.SlotState) {
	if !r.cfg.SlotFailover || rc.ServerMajor() < replication.FailoverSlots {
		return
	}
	if !st.Failover {
		r.log.Warn("the slot is not a failover slot, so a promoted standby will not have it; make it one on a "+
			"replication connection: psql \"dbname=<database> replication=database\" -c "+
			"\"ALTER_REPLICATION_SLOT "+r.cfg.Slot+" (FAILOVER true)\" (or set slot-failover false to silence this)",
			"slot", r.cfg.Slot)
		return
	}
	var standbys string
	if err := conn.QueryRow(ctx, "SELECT current_setting('synchronized_standby_slots', true)").Scan(&standbys); err == nil && standbys == "" {
		r.log.Warn("synchronized_standby_slots is empty: the slot may confirm WAL a standby has not received, and a "+
			"failover to that standby then loses those events; set it on the primary to the standbys' physical slots",
			"slot", r.cfg.Slot)
	}
}

// createSlot creates the slot and publishes, through its exported snapshot, every
// pending row committed before it: those rows will never appear in the stream, and
// rows committed later will, so there is neither a gap nor an overlap. The slot is
// recorded as pending first and as done last, so a crash in between makes the next
// session create it again and repeat the pass (duplicates, never a loss).
func (r *Relay) createSlot(ctx context.Context, conn *pgx.Conn, rc *replication.Conn, snk sink.Sink, bk *poller.Bookkeeper) (pglogrepl.LSN, time.Time, error) {
	incarnation, err := replication.RecordSlot(ctx, conn, r.cfg.Slot)
	if err != nil {
		return 0, time.Time{}, err
	}
	created, err := rc.CreateSlot(ctx, r.cfg.Slot, r.cfg.SlotFailover)
	if err != nil {
		return 0, time.Time{}, err
	}
	r.log.Info("created replication slot; publishing rows committed before it", "slot", r.cfg.Slot,
		"consistent_point", created.ConsistentPoint.String(), "failover", r.cfg.SlotFailover && rc.ServerMajor() >= replication.FailoverSlots)

	started := time.Now()
	n, err := r.catchUp(ctx, conn, snk, bk, created)
	if err != nil {
		return 0, time.Time{}, errorf("catch-up pass", err)
	}
	if err := replication.MarkCatchupDone(ctx, conn, r.cfg.Slot, incarnation); err != nil {
		return 0, time.Time{}, err
	}
	r.log.Info("catch-up pass done", "slot", r.cfg.Slot, "events", n, "took", time.Since(started).Round(time.Millisecond).String())
	return created.ConsistentPoint, incarnation, nil
}
