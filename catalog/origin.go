package catalog

import (
	"fmt"
	"strconv"
	"time"
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
