package poller

// Lag stands for a server whose snapshots have not caught up with some rows yet:
// what the bookkeeper sees on a primary while a transaction it already has an
// outcome of is still committing (see Outcome). Tests inject it to make that moment
// last as long as they need; it is nil otherwise.
type Lag interface {
	// Hidden reports whether o's row is not visible to the batch about to look it
	// up; the batch then leaves it out and treats it as not found.
	Hidden(o *Outcome) bool
	// Unfinished reports whether o's transaction is not finished yet for the
	// snapshot the bookkeeper asks about it, whatever the server answers.
	Unfinished(o *Outcome) bool
}
