package replication

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

func setUserTimeout(fd uintptr, d time.Duration) error {
	if err := unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds())); err != nil {
		return fmt.Errorf("set TCP_USER_TIMEOUT on the database socket: %w", err)
	}
	return nil
}
