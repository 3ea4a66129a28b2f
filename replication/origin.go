package replication

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/catalog"
)

// Identify returns the origin of this connection's server for slot, created at
// created, and the server's current WAL flush position.
func (c *Conn) Identify(ctx context.Context, slot string, created time.Time) (catalog.Origin, pglogrepl.LSN, error) {
	id, err := pglogrepl.IdentifySystem(ctx, c.pg)
	if err != nil {
		return catalog.Origin{}, 0, fmt.Errorf("identify system: %w", err)
	}
	return catalog.Origin{System: id.SystemID, Database: id.DBName, Slot: slot, SlotCreated: created, Timeline: id.Timeline}, id.XLogPos, nil
}

// Continues reports whether a position at lsn recorded under stored is part of the
// history of current, whose server has flushed WAL up to serverPos; when it is not,
// why says what differs. A position on an earlier timeline counts when that timeline
// ended at or after lsn (the server's timeline history says where it ended).
func (c *Conn) Continues(ctx context.Context, stored catalog.Origin, lsn pglogrepl.LSN, current catalog.Origin, serverPos pglogrepl.LSN) (ok bool, why string, err error) {
	switch {
	case stored.System != current.System:
		return false, "another database cluster (system identifier " + stored.System + ")", nil
	case stored.Database != current.Database || stored.Slot != current.Slot:
		return false, "another database or slot", nil
	case !stored.SlotCreated.Equal(current.SlotCreated):
		return false, "an earlier incarnation of the slot", nil
	case lsn > serverPos:
		return false, fmt.Sprintf("WAL this server does not have (position %s, server at %s: restored from an older copy?)", lsn, serverPos), nil
	case stored.Timeline == current.Timeline:
		return true, "", nil
	case stored.Timeline > current.Timeline:
		return false, fmt.Sprintf("a later timeline (%d; this server is on %d)", stored.Timeline, current.Timeline), nil
	}
	hist, err := pglogrepl.TimelineHistory(ctx, c.pg, current.Timeline)
	if err != nil {
		return false, "", fmt.Errorf("read timeline history: %w", err)
	}
	end, found, err := timelineEnd(hist.Content, stored.Timeline)
	if err != nil || !found {
		return false, fmt.Sprintf("timeline %d, not in this server's history", stored.Timeline), err
	}
	if lsn > end {
		return false, fmt.Sprintf("timeline %d past its end at %s (a standby promoted before it had that WAL)", stored.Timeline, end), nil
	}
	return true, "", nil
}

// timelineEnd finds where timeline tli ended in a timeline history file: lines of
// "parent timeline <tab> switch point <tab> reason".
func timelineEnd(history []byte, tli int32) (pglogrepl.LSN, bool, error) {
	sc := bufio.NewScanner(bytes.NewReader(history))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		parent, err := strconv.Atoi(fields[0])
		if err != nil || int32(parent) != tli {
			continue
		}
		end, err := pglogrepl.ParseLSN(fields[1])
		if err != nil {
			return 0, false, fmt.Errorf("timeline history: %w", err)
		}
		return end, true, nil
	}
	return 0, false, sc.Err()
}
