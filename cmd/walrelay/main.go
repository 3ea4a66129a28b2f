// Command walrelay relays the rows an application writes to its PostgreSQL outbox
// table to Kafka, reading them from the WAL through a logical replication slot.
//
// Exit codes: 0 success, 1 runtime failure, 2 bad usage or configuration (reported
// before any connection is opened).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// runtimeError marks a failure after the configuration was accepted: exit code 1.
type runtimeError struct{ err error }

func (e runtimeError) Error() string { return e.err.Error() }
func (e runtimeError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := &cobra.Command{
		Use:   "walrelay",
		Short: "Relay PostgreSQL outbox rows to Kafka through logical replication",
		Long: "walrelay publishes every row committed to the outbox table to Kafka, at least once and in commit\n" +
			"order per aggregate, reading inserts from the WAL through a logical replication slot.\n\n" +
			"Settings come from flags, WALRELAY_* environment variables and an optional YAML file (--config),\n" +
			"in that order of precedence.",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.AddCommand(runCommand(), migrateCommand(), statusCommand(), dlqCommand(), demoCommand(), importDebeziumCommand())
	err := root.ExecuteContext(ctx)
	if err == nil {
		return
	}
	var rt runtimeError
	if errors.As(err, &rt) {
		var problems problemsFound
		if !errors.As(err, &problems) { // status printed its problems already
			fmt.Fprintln(os.Stderr, "walrelay:", err)
		}
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "walrelay: %v\nRun 'walrelay --help' for usage.\n", err)
	os.Exit(2)
}
