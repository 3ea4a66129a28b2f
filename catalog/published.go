package catalog

import "strconv"

// The "published" condition of --on-publish progress (docs/design.md invariant 10),
// built here once for the pending view (migrations/plan.go), walrelay status
// (ops/status.go), retirement (poller/store.go) and catch-up passes
// (relay/catchup.go). Each function returns an SQL condition over the rows of one
// outbox table, read in a statement whose FROM names that table alone, so that xmin,
// processed_at, retry_after and dead_lettered_at are its row's.

// fullXmin is the row's xmin widened to its 64-bit xid (walrelay_full_xid, migration 8).
const fullXmin = "walrelay_full_xid(xmin, (SELECT walrelay_next_xid()))"

// Horizon is the published horizon of table (NULL when it has none, or none that
// speaks for this database): table is an SQL expression of its name, a quoted
// literal or a text parameter ("$2::text").
func Horizon(table string) string {
	return "(SELECT walrelay_horizon(" + table + "::regclass))"
}

// NotPublished is true for a row of table that is not published: not marked, and
// handed over, a dead letter, or not below the horizon. sep separates the row's
// columns from the horizon: " " in a statement, "\n    " in the view `walrelay
// migrate` prints.
func NotPublished(table, sep string) string {
	return "NOT walrelay_published(xmin, processed_at, retry_after, dead_lettered_at," + sep +
		Horizon(table) + ", (SELECT walrelay_next_xid()))"
}

// BelowHorizon is true for a row of table inserted below its published horizon (false
// when it has none). With processed_at, retry_after and dead_lettered_at NULL it is
// walrelay_published's horizon case, which retirement reads the pending index by.
func BelowHorizon(table string) string {
	return fullXmin + " < coalesce(" + Horizon(table) + ", 0)"
}

// NotBelow is true for a row inserted at or after the xid horizon: the rows a
// catch-up pass publishes past a lost incarnation's horizon.
func NotBelow(horizon uint64) string {
	return fullXmin + " >= " + strconv.FormatUint(horizon, 10)
}

// OlderThanXids is true for a row inserted more than age xids before the next xid.
func OlderThanXids(age int) string {
	return fullXmin + " < (SELECT walrelay_next_xid()) - " + strconv.Itoa(age)
}
