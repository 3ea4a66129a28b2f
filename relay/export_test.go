package relay

import "github.com/walrelay/walrelay/poller"

// SetBookkeepingLag makes the relay's bookkeeping see its server behind (poller.Lag),
// for the tests of package relay_test.
func SetBookkeepingLag(c *Config, lag poller.Lag) { c.bookkeepingLag = lag }
