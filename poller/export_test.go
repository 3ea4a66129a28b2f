package poller

// SelectQuery exposes the poll query to the tests of package poller_test.
var SelectQuery = selectQuery
