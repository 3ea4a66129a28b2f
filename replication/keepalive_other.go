//go:build !linux

package replication

import "time"

// setUserTimeout does nothing where TCP_USER_TIMEOUT does not exist: keepalive
// probes alone end a dead idle socket there.
func setUserTimeout(uintptr, time.Duration) error { return nil }
