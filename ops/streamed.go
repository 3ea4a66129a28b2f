package ops

import (
	"fmt"
	"time"
)

// slotHolder is what the server says of the process that holds a slot: whether
// a walsender (a replication connection) holds it, and when that walsender last
// heard from its client.
type slotHolder struct {
	Active bool // pg_replication_slots.active
	PID    int  // its active_pid
	// Walsender: pg_stat_replication has a row for PID, so a replication
	// connection holds the slot rather than a function such as
	// pg_logical_slot_get_changes in an ordinary session.
	Walsender bool
	// Heard is the walsender's last standby status update (reply_time), or its
	// start while none came yet: the client's word that it is there. Nil when the
	// server hides both from the reading role (it lacks pg_read_all_stats and is
	// not the relay's).
	Heard *time.Time
	// Now is the server's clock when this was read; Timeout its wal_sender_timeout
	// (0: none).
	Now     time.Time
	Timeout time.Duration
}

// streamed says whether a relay streams the slot: a walsender holds it and heard
// from its client within wal_sender_timeout. A paused relay still sends status
// updates, so it counts. A process that just stopped counts until the server sees
// its connection close; one that hangs, or is cut off, stops counting once it has
// been silent for wal_sender_timeout, whatever the walsender's own timeout is.
// When it does not count, why says so.
func (h slotHolder) streamed() (ok bool, why string) {
	switch {
	case !h.Active:
		return false, ""
	case !h.Walsender:
		return false, fmt.Sprintf("process %d holds it but is not a walsender (a pg_logical_slot_get_changes "+
			"or pg_replication_slot_advance call?), so no relay streams it", h.PID)
	case h.Timeout <= 0 || h.Heard == nil: // no timeout, or hidden: the live walsender is all there is to go by
		return true, ""
	}
	silent := h.Now.Sub(*h.Heard)
	if silent <= h.Timeout {
		return true, ""
	}
	return false, fmt.Sprintf("walsender %d holds it but has not heard from its client for %s, longer than "+
		"wal_sender_timeout (%s): the relay there is gone or hung (its log says why; stop it, or end the walsender "+
		"with SELECT pg_terminate_backend(%d))", h.PID, silent.Round(time.Millisecond), h.Timeout, h.PID)
}
