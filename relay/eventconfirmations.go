package relay

import "github.com/jackc/pglogrepl"

// eventConfirmations tells, for each LSN the stream confirms, whether it passed
// events no earlier confirmation passed: what moves the events-confirmed timestamp
// (the stall detector, /status) and wakes the record of the confirmed position.
//
// The watermark gives only the end of the newest settled transaction with events,
// and a confirmation held back by the confirm check trails it: under steady load
// that end is past every confirmation, although each one passes events. So the
// tracker remembers one event end still owed a confirmation and counts the
// confirmation that reaches it, one check later at most.
type eventConfirmations struct {
	reached pglogrepl.LSN // the newest event end a confirmation reached
	owed    pglogrepl.LSN // an event end past reached, not yet confirmed (0: none)
}

// confirmed takes a confirmed LSN and the watermark's newest settled event end, and
// reports whether the confirmation passed events not confirmed before.
func (c *eventConfirmations) confirmed(lsn, settled pglogrepl.LSN) bool {
	if c.owed == 0 && settled > c.reached {
		c.owed = settled
	}
	if c.owed == 0 || c.owed > lsn {
		return false
	}
	c.reached, c.owed = c.owed, 0
	if settled <= lsn {
		c.reached = settled
	} else {
		c.owed = settled // settled events past this confirmation are owed the next one
	}
	return true
}
