//go:build race

package main_test

// Under -race the walrelay binary is built with the race detector as well.
func init() { raceBuild = true }
