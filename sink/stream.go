package sink

import (
	"context"
	"strconv"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/outbox"
)

// Transactional is a sink that can produce a replication stream's events in
// transactions that also record the stream's position (Kafka), which exactly-once
// delivery needs: events and position become visible together or not at all.
type Transactional interface {
	Sink
	// OpenStream fences out earlier producers of the stream named id and returns a
	// producer for it, with the position those producers committed (ok false: none).
	OpenStream(ctx context.Context, id string) (p StreamProducer, committed Position, ok bool, err error)
}

// StreamProducer produces one session's events in transactions.
type StreamProducer interface {
	// Produce adds e to the open transaction, beginning one when needed.
	Produce(e *outbox.Event) error
	// Commit records pos in the open transaction and commits it. After an error the
	// producer is unusable.
	Commit(ctx context.Context, pos Position) error
	// Poisoned returns the events of a failed transaction that failed on their own
	// and would fail again in any transaction.
	Poisoned() map[EventKey]error
	// Close aborts an open transaction and releases the producer.
	Close()
}

// Position is how far a stream's events are committed: every event of every
// transaction whose commit LSN is below LSN, and the first Events events of the
// transaction at LSN (Events < 0: all of them). Origin names the WAL history the LSN
// belongs to; the relay decides whether it is its own.
type Position struct {
	LSN    pglogrepl.LSN
	Events int
	Origin string
}

// Covers reports whether event index idx of the transaction committing at lsn is
// committed at or before p.
func (p Position) Covers(lsn pglogrepl.LSN, idx int) bool {
	return lsn < p.LSN || lsn == p.LSN && (p.Events < 0 || idx < p.Events)
}

func (p Position) String() string {
	s := p.LSN.String() + "/" + strconv.Itoa(p.Events)
	if p.Events < 0 {
		s = p.LSN.String() + "/all"
	}
	if p.Origin != "" {
		s += " " + p.Origin
	}
	return s
}

// EventKey names an event among a stream's: an id is unique only within its outbox
// table, and one stream may carry several.
type EventKey struct{ Table, ID string }

// KeyOf is e's EventKey.
func KeyOf(e *outbox.Event) EventKey { return EventKey{Table: e.Table, ID: e.ID} }
