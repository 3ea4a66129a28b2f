//go:build unix

package replication

import "syscall"

func setRcvLowat(fd uintptr, n int) error {
	return syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, n)
}
