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
)

// Origin names the WAL history that a stored stream position belongs to: the
// database cluster (system identifier), the database, the slot and when walrelay
// created it, and the timeline (docs/design.md invariant 8). An LSN means nothing
// without it: after a restore, a failover to a lagging standby, or on another
// cluster, the same LSN is other WAL.
type Origin struct {
	System      string
	Database    string
	Slot        string
	SlotCreated time.Time // when walrelay created or adopted the slot (zero: not recorded)
	Timeline    int32
}

// Key names the origin without its timeline: stable across a promotion, unique
// per cluster, database and slot.
func (o Origin) Key() string { return o.System + "/" + o.Database + "/" + o.Slot }

func (o Origin) String() string {
	created := "none"
	if !o.SlotCreated.IsZero() {
		created = o.SlotCreated.UTC().Format(time.RFC3339Nano)
	}
	return "system=" + o.System + " database=" + strconv.Quote(o.Database) + " slot=" + strconv.Quote(o.Slot) +
		" slot_created=" + created + " timeline=" + strconv.Itoa(int(o.Timeline))
}

// ParseOrigin parses what String printed.
func ParseOrigin(s string) (Origin, error) {
	var o Origin
	var database, slot, created string
	var timeline int
	if _, err := fmt.Sscanf(s, "system=%s database=%q slot=%q slot_created=%s timeline=%d",
		&o.System, &database, &slot, &created, &timeline); err != nil {
		return Origin{}, fmt.Errorf("origin %q: %w", s, err)
	}
	o.Database, o.Slot, o.Timeline = database, slot, int32(timeline)
	if created != "none" {
		t, err := time.Parse(time.RFC3339Nano, created)
		if err != nil {
			return Origin{}, fmt.Errorf("origin %q: slot_created: %w", s, err)
		}
		o.SlotCreated = t
	}
	return o, nil
}

// Identify returns the origin of this connection's server for slot, created at
// created, and the server's current WAL flush position.
func (c *Conn) Identify(ctx context.Context, slot string, created time.Time) (Origin, pglogrepl.LSN, error) {
	id, err := pglogrepl.IdentifySystem(ctx, c.pg)
	if err != nil {
		return Origin{}, 0, fmt.Errorf("identify system: %w", err)
	}
	return Origin{System: id.SystemID, Database: id.DBName, Slot: slot, SlotCreated: created, Timeline: id.Timeline}, id.XLogPos, nil
}

// Continues reports whether a position at lsn recorded under stored is part of the
// history of current, whose server has flushed WAL up to serverPos; when it is not,
// why says what differs. A position on an earlier timeline counts when that timeline
// ended at or after lsn (the server's timeline history says where it ended).
func (c *Conn) Continues(ctx context.Context, stored Origin, lsn pglogrepl.LSN, current Origin, serverPos pglogrepl.LSN) (ok bool, why string, err error) {
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
