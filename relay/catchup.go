package relay

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/replication"
	"github.com/walrelay/walrelay/sink"
)

// catchUp publishes the pending rows of tables visible in the pass's snapshot
// through the same window as the stream, and waits for every ack: the snapshot the
// new slot exported (snapshot, by name), or, with snapshot empty, the one the pass's
// transaction takes at its first statement. Rows go in created_at order
// (the inserting transaction's start) and, within one transaction, in physical
// order, which is insertion order for appended rows; only transactions that ran
// concurrently can be ordered differently from their commits. A table without a
// created_at column goes in physical order alone, and its events carry the time of
// the pass as created_at: a row's commit time is not in the table.
func (r *Relay) catchUp(ctx context.Context, conn *pgx.Conn, snk sink.Sink, bk *poller.Bookkeeper, snapshot string,
	at pglogrepl.LSN, tables []*table) (int, error) {
	// A paused relay publishes nothing, a pass included: it waits for the resume
	// before it takes its snapshot's rows.
	if err := r.waitResumed(ctx, "the catch-up pass waits for the resume"); err != nil {
		return 0, err
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return 0, errorf("begin snapshot transaction", err)
	}
	defer tx.Rollback(context.Background())
	if snapshot != "" {
		if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+strings.ReplaceAll(snapshot, "'", "''")+"'"); err != nil {
			return 0, errorf("import slot snapshot", err)
		}
	}
	pub := r.passPublisher(snk, bk)
	wm := replication.NewWatermark(r.window, 0)
	wm.Begin()
	n := 0
	var readErr error
	// Every table through the one snapshot: each is read up to the stream's start.
	for _, t := range tables {
		if readErr = r.catchUpTable(ctx, tx, t, pub, wm, &n); readErr != nil {
			break
		}
	}
	wm.Commit(at)
	// Like a stopping stream, settle what was handed to the broker, within the
	// shutdown timeout, even when ctx ended: acked rows get marked, so a repeated
	// pass publishes fewer of them again.
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.ShutdownTimeout)
	defer cancel()
	if err := snk.Flush(drainCtx); err != nil {
		return n, errorf("wait for acks", err)
	}
	if err := bk.Wait(drainCtx); err != nil {
		return n, errorf("wait for bookkeeping", err)
	}
	if readErr != nil {
		return n, errorf("read pending rows", readErr)
	}
	if err := wm.Err(); err != nil {
		return n, err
	}
	if !wm.Idle() {
		return n, fmt.Errorf("%d events still unacknowledged after flush", n)
	}
	return n, nil
}

// catchUpTable publishes one table's pending rows in the pass, counting them in n.
// Rows below the published horizon the slot recorded in this database were published
// by it (docs/design.md invariant 10) and are left out.
func (r *Relay) catchUpTable(ctx context.Context, tx pgx.Tx, t *table, pub *publisher, wm *replication.Watermark, n *int) error {
	horizon, err := catalog.ReadPublished(ctx, tx, r.cfg.Slot, t.name)
	if err != nil {
		return err
	}
	if horizon > 0 {
		r.log.Info("catch-up pass leaves out the rows below the published horizon the slot recorded",
			"slot", r.cfg.Slot, "table", t.name, "published_xid", horizon)
	}
	query, count, err := catchUpQuery(ctx, tx, t.shape, horizon, r.onStandby)
	if err != nil {
		return err
	}
	var next uint32 // the snapshot's xmax, 32 bits: each row's xmin is older
	if err := tx.QueryRow(ctx, "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint % 4294967296").Scan(&next); err != nil {
		return errorf("read the snapshot's xmax", err)
	}
	var nullIDRow pgtype.Text // a row with a NULL id: its version, as text
	var xmin uint32           // on a standby: the row's xmin
	extra := []any{&nullIDRow}
	if r.onStandby {
		extra = append(extra, &xmin)
	}
	var total int64
	if err := tx.QueryRow(ctx, count).Scan(&total); err != nil {
		return errorf("count pending rows", err)
	}
	rows, err := tx.Query(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	progress := r.newProgressLog("catch-up pass in progress", "rows", total, "slot", r.cfg.Slot, "table", t.name)
	done := int64(0)
	for rows.Next() {
		ev, unpublishable, err := poller.ScanEvent(rows, t.shape, extra...)
		if err != nil {
			return err
		}
		at := position{}
		if r.onStandby && next-xmin < recentXids {
			// The standby can show a row before the primary, where the bookkeeping
			// writes, does: its settlement waits for the row's transaction there.
			at.xid, at.rowXid = xmin, true
		}
		t.label(&ev)
		ev.PayloadType = t.shape.PayloadType
		if err := r.waitForRoom(ctx, wm); err != nil {
			return err
		}
		done++
		progress.update(time.Now(), done)
		if unpublishable != nil {
			row := outbox.Event{ID: ev.ID}
			t.label(&row)
			var version poller.RowVersion
			if nullIDRow.Valid {
				if version, err = parseRowVersion(nullIDRow.String); err != nil {
					return err
				}
			}
			pub.deadLetterRead(row, unpublishable, version, at, wm.Track(0))
			continue
		}
		size := ev.Size()
		pub.publish(&ev, at, wm.Track(size), size)
		*n++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	progress.finish(time.Now(), done, "catch-up pass read every pending row of the table")
	return nil
}

// parseRowVersion reads a row's version as catchUpQuery selects it: its tableoid,
// ctid and xmin, space-separated.
func parseRowVersion(text string) (poller.RowVersion, error) {
	var v poller.RowVersion
	if _, err := fmt.Sscanf(text, "%d %s %d", &v.Table, &v.Position, &v.Xmin); err != nil {
		return v, fmt.Errorf("read the version %q of a row with a NULL id: %w", text, err)
	}
	return v, nil
}

// recentXids is how young a row's xmin is for a pass on a standby to pass it on
// (position.rowXid): a transaction the primary may not show yet is younger by far,
// and the bookkeeping widens it to 64 bits exactly. An older one, a frozen row's
// included, is finished there for good.
const recentXids = 1 << 30

// waitForRoom waits until the window has room for another event of the pass.
func (r *Relay) waitForRoom(ctx context.Context, wm *replication.Watermark) error {
	for r.window.Full() {
		if err := wm.Err(); err != nil {
			return err
		}
		r.window.Wait(ctx, time.Now().Add(time.Second))
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return wm.Err()
}

// catchUpQuery selects pending rows: not processed, dead-lettered or handed to the
// poller, where the table has those bookkeeping columns, and not below the published
// horizon (0: none). count counts them. After the event's columns come, for a row
// with a NULL id, its version as text (parseRowVersion; NULL for the others), and
// with xmin each row's xmin. Both are cheap to carry through the sort, which is
// most of the pass's time, and keep the plan parallel.
func catchUpQuery(ctx context.Context, tx pgx.Tx, shape catalog.Shape, horizon uint64, xmin bool) (query, count string, err error) {
	ident := shape.Ident()
	cols, err := catalog.HandOverColumns(ctx, tx, ident)
	if err != nil {
		return "", "", errorf("read bookkeeping columns", err)
	}
	// Rows handed to the poller (retry_after set) are the poller's to publish.
	where := "true"
	for _, c := range cols {
		where += " AND " + c + " IS NULL"
	}
	if horizon > 0 {
		where += " AND " + catalog.NotBelow(horizon)
	}
	extra := ", CASE WHEN " + pgx.Identifier{shape.Columns.ID}.Sanitize() + " IS NULL THEN " +
		"tableoid::text || ' ' || ctid::text || ' ' || xmin::text END"
	if xmin {
		extra += ", xmin"
	}
	return "SELECT " + poller.EventColumns(shape) + extra + " FROM " + ident + " WHERE " + where + " ORDER BY " + poller.OrderBy(shape),
		"SELECT count(*) FROM " + ident + " WHERE " + where, nil
}
