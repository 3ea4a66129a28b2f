package relay

import (
	"context"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/replication"
)

// resumeFrom returns where a session streams from: the slot's confirmed position
// (slotAt), or the relay's record of what it confirmed when that is further on and
// from this WAL history (docs/design.md invariant 8): the same cluster, database and
// slot incarnation, on this timeline or an earlier one that this server's history
// passed through after that position. A record from elsewhere is ignored, loudly. The
// record is read from books, where the bookkeeping lives: on a decoding standby that
// is the primary, whose WAL the standby replays, so the LSNs are the same; a record
// the standby has not replayed up to yet is waited for by the server, which streams
// nothing before it.
func (r *Relay) resumeFrom(ctx context.Context, books *pgx.Conn, rc *replication.Conn, here catalog.Origin,
	serverAt, slotAt pglogrepl.LSN) (pglogrepl.LSN, error) {
	if r.cfg.Delivery == ExactlyOnce {
		return slotAt, nil
	}
	stored, lsn, ok, err := catalog.ReadConfirmed(ctx, books, r.cfg.Slot)
	if err != nil || !ok || lsn <= slotAt {
		return slotAt, err
	}
	if r.onStandby {
		// The record was written on the primary: the WAL it names is the primary's.
		var at string
		if err := books.QueryRow(ctx, "SELECT pg_current_wal_flush_lsn()::text").Scan(&at); err != nil {
			return slotAt, fmt.Errorf("read the primary's WAL position: %w", err)
		}
		if serverAt, err = pglogrepl.ParseLSN(at); err != nil {
			return slotAt, fmt.Errorf("read the primary's WAL position: %w", err)
		}
	}
	same, why, err := rc.Continues(ctx, stored, lsn, here, serverAt)
	if err != nil {
		return slotAt, err
	}
	if !same {
		r.log.Warn("ignoring the recorded confirmed position, which comes from "+why+"; streaming from the slot's "+
			"confirmed position, so events confirmed since the server last saved the slot may be published again",
			"slot", r.cfg.Slot, "recorded_lsn", lsn.String(), "recorded_origin", stored.String(), "origin", here.String(),
			"slot_confirmed_lsn", slotAt.String())
		return slotAt, nil
	}
	r.log.Info("the slot's confirmed position is behind the one this relay recorded (the server saves it only now "+
		"and then: it restarted or crashed since); streaming from the recorded position", "slot", r.cfg.Slot,
		"slot_confirmed_lsn", slotAt.String(), "recorded_lsn", lsn.String())
	return lsn, nil
}
