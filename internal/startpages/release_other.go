//go:build !linux

package startpages

// Release does nothing where the kernel's mappings cannot be read as on Linux.
func Release() (int64, error) { return 0, nil }
