package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// errDemoMoved answers `walrelay demo`: the demo links an in-process Kafka broker and
// the throwaway-cluster helper, which a service binary must not carry, so it is a
// binary of its own (cmd/walrelay-demo) that `make demo` builds and runs.
var errDemoMoved = errors.New("the demo is not part of the walrelay binary: run `make demo` " +
	"(or `go run ./cmd/walrelay-demo`) in the source tree")

// demoCommand keeps `walrelay demo` answering with where the demo went (exit 2),
// instead of cobra's bare "unknown command". It is hidden from the help and takes
// any arguments, so the old invocations with flags get the same answer.
func demoCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "demo",
		Short:              "Moved: run `make demo`",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return errDemoMoved
		},
	}
}
