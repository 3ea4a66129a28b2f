//go:build !unix

package replication

import "errors"

func setRcvLowat(uintptr, int) error { return errors.ErrUnsupported }
