package poller

// SelectQuery exposes the poll query to the tests of package poller_test.
var SelectQuery = selectQuery

// XidDistance exposes the poll-only due test's measure of an xid's age.
var XidDistance = xidDistance
