package sqs

import "time"

// maxEntries is SQS's limit of entries per SendMessageBatch request.
const maxEntries = 10

// lookupState is how far a queue's URL is known.
type lookupState int

const (
	unknown   lookupState = iota // to be looked up when it has events
	looking                      // a lookup is under way
	available                    // url and maxSize are known
)

// queue holds the events waiting for one SQS queue, guarded by Sink.mu.
//
// The order rule of a FIFO queue: a message group (an aggregate) has at most one
// message in flight, and a request carries at most one message of a group. A
// group's next message is taken only after its previous one was settled (SQS
// accepted it, or its outcome, an *sink.EventError, was given to done), so a later
// message is never sent before an earlier one is acknowledged or settled, however
// many requests are under way and however often one is retried. A standard queue
// keeps no order (SQS does not), so its events go in any request, oldest first.
type queue struct {
	name    string
	fifo    bool
	state   lookupState
	url     string
	maxSize int // the queue's MaximumMessageSize

	// FIFO: the groups with waiting events, and those whose head may be sent now,
	// in the order they became ready.
	groups map[string]*group
	ready  []*group
	// Standard: the waiting events in publish order.
	waiting []*item
}

// group is one FIFO message group's waiting events.
type group struct {
	id      string
	items   []*item
	busy    bool      // its previous event is in a request, not yet settled
	readyAt time.Time // when its head became sendable
}

func newQueue(name string, fifo bool) *queue {
	q := &queue{name: name, fifo: fifo}
	if fifo {
		q.groups = map[string]*group{}
	}
	return q
}

// push adds a published event.
func (q *queue) push(it *item) {
	it.q = q
	if !q.fifo {
		q.waiting = append(q.waiting, it)
		return
	}
	id := ""
	if it.err == nil {
		id = *it.entry.MessageGroupId
	} else {
		id = fifoID(it.ev.AggregateID) // refused in its group's turn
	}
	g := q.groups[id]
	if g == nil {
		g = &group{id: id}
		q.groups[id] = g
	}
	g.items = append(g.items, it)
	if len(g.items) == 1 && !g.busy {
		g.readyAt = it.queued
		q.ready = append(q.ready, g)
	}
	it.group = g
}

// due reports whether a request should go now: a full one can, one that is not
// full once its oldest entry waited linger. Otherwise it says how long until then
// (0: nothing to send).
func (q *queue) due(now time.Time, linger time.Duration) (bool, time.Duration) {
	var n int
	var oldest time.Time
	if q.fifo {
		n = len(q.ready)
		if n > 0 {
			oldest = q.ready[0].readyAt
		}
	} else {
		n = len(q.waiting)
		if n > 0 {
			oldest = q.waiting[0].queued
		}
	}
	if n == 0 {
		return false, 0
	}
	if n >= maxEntries {
		return true, 0
	}
	if wait := linger - now.Sub(oldest); wait > 0 {
		return false, wait
	}
	return true, 0
}

// take removes the next request's entries: at most maxEntries, of at most maxBytes
// together (a first entry alone may be larger, up to the queue's maxSize), one per
// group. Events SQS would refuse come back as refused, for their done to be called
// before the request is sent.
func (q *queue) take(maxBytes int) (batch, refused []*item) {
	bytes := 0
	fits := func(it *item) bool { return len(batch) == 0 || bytes+it.size <= maxBytes }
	if !q.fifo {
		for len(q.waiting) > 0 && len(batch) < maxEntries {
			it := q.waiting[0]
			if it.err == nil && it.size <= q.maxSize && !fits(it) {
				break
			}
			q.waiting[0] = nil
			q.waiting = q.waiting[1:]
			if it.err != nil || it.size > q.maxSize {
				refused = append(refused, it)
				continue
			}
			batch, bytes = append(batch, it), bytes+it.size
		}
		return batch, refused
	}
	for len(q.ready) > 0 && len(batch) < maxEntries {
		g := q.ready[0]
		it := g.items[0]
		if it.err == nil && it.size <= q.maxSize && !fits(it) {
			break
		}
		g.items[0] = nil
		g.items = g.items[1:]
		if it.err != nil || it.size > q.maxSize {
			refused = append(refused, it) // the group stays ready: its next event may follow once this one is settled
			if len(g.items) == 0 {
				q.ready = q.ready[1:]
				delete(q.groups, g.id)
			}
			continue
		}
		g.busy, it.sent = true, true
		q.ready[0] = nil
		q.ready = q.ready[1:]
		batch, bytes = append(batch, it), bytes+it.size
	}
	return batch, refused
}

// settled releases the group of it, an event taken by take, whose done was called.
func (q *queue) settled(it *item) {
	g := it.group
	if g == nil || !it.sent {
		return // a standard queue's, or refused before its group was busy with it
	}
	g.busy = false
	if len(g.items) == 0 {
		if q.groups[g.id] == g {
			delete(q.groups, g.id)
		}
		return
	}
	g.readyAt = g.items[0].queued
	q.ready = append(q.ready, g)
}

// has reports whether events wait.
func (q *queue) has() bool {
	if len(q.waiting) > 0 || len(q.ready) > 0 {
		return true
	}
	for _, g := range q.groups {
		if len(g.items) > 0 {
			return true
		}
	}
	return false
}

// drain removes every waiting event, appending it to out.
func (q *queue) drain(out []*item) []*item {
	out = append(out, q.waiting...)
	q.waiting = nil
	for id, g := range q.groups {
		out = append(out, g.items...)
		g.items = nil
		if !g.busy {
			delete(q.groups, id)
		}
	}
	q.ready = nil
	return out
}
