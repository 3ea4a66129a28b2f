package relay

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// prepareSlot makes the slot ready to stream and returns where streaming starts and
// the slot's incarnation: as it is, created (again) with a catch-up pass when it is
// missing or lost, kept with its pass repeated when that did not finish, or adopted
// when walrelay did not create it. A slot that had to be replaced is news
// (docs/design.md invariant 9). The tables of claim that no pass has covered get a
// pass of their own before streaming.
func (r *Relay) prepareSlot(ctx context.Context, conn, slots *pgx.Conn, rc *replication.Conn, snk sink.Sink, bk *poller.Bookkeeper,
	st catalog.SlotState, claim catalog.Claim) (pglogrepl.LSN, time.Time, error) {
	here, _, err := rc.Identify(ctx, r.cfg.Slot, st.Created)
	if err != nil {
		return 0, time.Time{}, err
	}
	r.warnHorizonsElsewhere(ctx, conn)
	start, created := st.Confirmed, st.Created
	switch {
	case st.Lost():
		r.slotReplaced(ctx, conn, "the slot was invalidated (wal_status = lost): PostgreSQL removed WAL it still needed, "+
			"usually because max_slot_wal_keep_size was exceeded while the relay was down or stuck")
		if err := rc.DropSlot(ctx, r.cfg.Slot); err != nil {
			return 0, time.Time{}, err
		}
		start, created, err = r.createSlot(ctx, conn, slots, rc, snk, bk)
	case !st.Exists && st.CatchupState == catalog.CatchupDone:
		r.slotReplaced(ctx, conn, missingSlotReason(st.StreamedOn, here))
		start, created, err = r.createSlot(ctx, conn, slots, rc, snk, bk)
	case !st.Exists:
		start, created, err = r.createSlot(ctx, conn, slots, rc, snk, bk)
	case st.CatchupState == catalog.CatchupPending:
		// The slot stays: table-less events committed past its confirmed position
		// are in no row, and a slot created again would start after them.
		r.log.Warn("the slot's catch-up pass did not finish last time; repeating it beside the slot", "slot", r.cfg.Slot)
		err = r.passBeside(ctx, conn, snk, bk, start, r.tableNames(), "catch-up pass", func() error {
			return catalog.MarkCatchupDone(ctx, conn, r.cfg.Slot, created, r.tableNames())
		})
	case st.CatchupState == catalog.CatchupUnknown:
		if created, err = catalog.AdoptSlot(ctx, conn, r.cfg.Slot, r.tableNames()); err == nil {
			r.log.Info("adopted a replication slot walrelay did not create (Debezium's, or one made by hand): it is "+
				"walrelay's from now on, and the transactions before its confirmed position count as published by its "+
				"creator", "slot", r.cfg.Slot, "confirmed_lsn", st.Confirmed.String())
		}
		r.checkFailover(ctx, conn, rc, st)
	default:
		r.checkFailover(ctx, conn, rc, st)
		if len(claim.Uncovered) > 0 {
			err = r.joinPass(ctx, conn, snk, bk, created, start, claim.Uncovered)
		}
	}
	if err != nil {
		return 0, time.Time{}, err
	}
	if err := catalog.RecordStreamed(ctx, conn, here); err != nil {
		return 0, time.Time{}, err
	}
	return start, created, nil
}

// joinPass publishes the rows of tables that joined the slot's list since its last
// catch-up pass (docs/design.md invariant 10): the slot's stream never carried those
// committed before the stream's start, nor those it skipped while the table was not
// listed. Until the pass is recorded the tables have no published horizon, and a
// relay stopped before then repeats the pass.
func (r *Relay) joinPass(ctx context.Context, conn *pgx.Conn, snk sink.Sink, bk *poller.Bookkeeper, created time.Time,
	start pglogrepl.LSN, names []string) error {
	r.log.Info("outbox tables joined the slot's list: publishing the rows they hold before streaming", "slot", r.cfg.Slot,
		"tables", names)
	return r.passBeside(ctx, conn, snk, bk, start, names, "join pass", func() error {
		return catalog.MarkCovered(ctx, conn, r.cfg.Slot, created, names)
	})
}

// passBeside publishes the pending rows of the tables named, for a slot that exists
// and stays, then records the pass with record. It reads them in a snapshot taken
// once every transaction that had an xid when it began has ended, so it sees every
// row whose commit the slot's confirmed position start passed; later rows come
// through the stream (a row in both is published twice).
func (r *Relay) passBeside(ctx context.Context, conn *pgx.Conn, snk sink.Sink, bk *poller.Bookkeeper,
	start pglogrepl.LSN, names []string, what string, record func() error) error {
	var tables []*table
	for _, name := range names {
		for i := range r.tables {
			if r.tables[i].name == name {
				tables = append(tables, &r.tables[i])
			}
		}
	}
	if err := catalog.AwaitOlderTransactions(ctx, conn, func(waiting int) {
		r.log.Info("waiting for transactions older than the pass to end", "slot", r.cfg.Slot, "transactions", waiting)
	}); err != nil {
		return errorf(what, err)
	}
	started := time.Now()
	n, err := r.catchUp(ctx, conn, snk, bk, "", start, tables)
	if err != nil {
		return errorf(what, err)
	}
	if err := record(); err != nil {
		return err
	}
	r.log.Info(what+" done", "slot", r.cfg.Slot, "tables", names, "events", n,
		"took", time.Since(started).Round(time.Millisecond).String())
	return nil
}

// warnHorizonsElsewhere says, once per session, that the slot's published horizons
// recorded in another cluster or database are ignored.
func (r *Relay) warnHorizonsElsewhere(ctx context.Context, conn *pgx.Conn) {
	elsewhere, err := catalog.HorizonsElsewhere(ctx, conn, r.cfg.Slot)
	if err != nil {
		r.log.Warn("could not read the slot's published horizons", "slot", r.cfg.Slot, "err", err)
		return
	}
	for _, e := range elsewhere {
		r.log.Warn("ignoring a published horizon recorded in another database cluster or database: this database is a "+
			"copy (pg_dump and pg_restore, logical replication), whose rows have other xids. The rows it covered count as "+
			"pending, and a catch-up pass publishes them again", "slot", r.cfg.Slot, "table", e.Table,
			"recorded_in_system", e.System, "recorded_in_database_oid", e.Database)
	}
}

// missingSlotReason tells why a slot walrelay streamed before is gone, from where it
// last streamed it and where it is now.
func missingSlotReason(before catalog.Streamed, here catalog.Origin) string {
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
		if without := r.tablesWithoutHorizon(ctx, conn); len(without) > 0 {
			msg = "replication slot lost; creating a new one and publishing every row not marked processed: the lost " +
				"slot recorded no published horizon in this database for " + strings.Join(without, ", ") +
				" (or only another cluster's), so events published before may all be published again"
		}
	}
	if r.cfg.OnPublish == poller.None {
		msg = "replication slot lost; creating a new one. With --on-publish none the table does not say " +
			"which rows were published: events committed while the slot was lost MAY BE LOST; " +
			"failover slots (PostgreSQL 17+) or --on-publish mark avoid it"
	}
	r.log.Error(msg, "slot", r.cfg.Slot, "why", why)
	if err := catalog.RecordReplaced(ctx, conn, r.cfg.Slot, why); err != nil {
		r.log.Warn("could not record the slot's replacement for walrelay status", "err", err)
	}
}

// tablesWithoutHorizon lists the tables the slot recorded no published horizon for
// in this database.
func (r *Relay) tablesWithoutHorizon(ctx context.Context, conn *pgx.Conn) []string {
	var without []string
	for _, t := range r.tables {
		if xid, err := catalog.ReadPublished(ctx, conn, r.cfg.Slot, t.name); err == nil && xid == 0 {
			without = append(without, t.name)
		}
	}
	return without
}

// checkFailover warns about what would lose the slot, or events, at a failover on a
// server that has failover slots.
func (r *Relay) checkFailover(ctx context.Context, conn *pgx.Conn, rc *replication.Conn, st catalog.SlotState) {
	if !r.cfg.SlotFailover || rc.ServerMajor() < replication.FailoverSlots || r.onStandby {
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
// session repeat the pass, beside the slot when it exists (duplicates, never a loss).
func (r *Relay) createSlot(ctx context.Context, conn, slots *pgx.Conn, rc *replication.Conn, snk sink.Sink, bk *poller.Bookkeeper) (pglogrepl.LSN, time.Time, error) {
	incarnation, err := catalog.RecordSlot(ctx, conn, r.cfg.Slot)
	if err != nil {
		return 0, time.Time{}, err
	}
	stopSnapshots := r.standbySnapshots(ctx)
	failover := r.cfg.SlotFailover && !r.onStandby // a standby's slot cannot be a failover slot
	created, err := rc.CreateSlot(ctx, r.cfg.Slot, failover)
	stopSnapshots()
	if err != nil {
		return 0, time.Time{}, err
	}
	r.log.Info("created replication slot; publishing rows committed before it", "slot", r.cfg.Slot,
		"consistent_point", created.ConsistentPoint.String(), "failover", failover && rc.ServerMajor() >= replication.FailoverSlots)

	started := time.Now()
	tables := make([]*table, len(r.tables))
	for i := range r.tables {
		tables[i] = &r.tables[i]
	}
	// The slot's snapshot is the standby's when the slot is there: the pass reads the
	// rows there, and a lagging standby's older marks and horizons only make it
	// publish more, never less.
	n, err := r.catchUp(ctx, slots, snk, bk, created.SnapshotName, created.ConsistentPoint, tables)
	if err != nil {
		return 0, time.Time{}, errorf("catch-up pass", err)
	}
	if err := catalog.MarkCatchupDone(ctx, conn, r.cfg.Slot, incarnation, r.tableNames()); err != nil {
		return 0, time.Time{}, err
	}
	r.log.Info("catch-up pass done", "slot", r.cfg.Slot, "events", n, "took", time.Since(started).Round(time.Millisecond).String())
	return created.ConsistentPoint, incarnation, nil
}
