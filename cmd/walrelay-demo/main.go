// Command walrelay-demo runs walrelay end to end on embedded defaults: a throwaway
// PostgreSQL cluster, franz-go's in-process Kafka-protocol broker (kfake), sample
// orders written through the outbox package and consumed back. `make demo` builds and
// runs it.
//
// It is a binary of its own so that the walrelay service binary links neither kfake
// nor the throwaway-cluster helper (which switches to the postgres OS user as root).
//
// Exit codes, as walrelay's: 0 success, 1 runtime failure, 2 bad usage.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/internal/demo"
)

// runtimeError marks a failure after the flags were accepted: exit code 1.
type runtimeError struct{ err error }

func (e runtimeError) Error() string { return e.err.Error() }
func (e runtimeError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newCommand().ExecuteContext(ctx)
	if err == nil {
		return
	}
	var rt runtimeError
	if errors.As(err, &rt) {
		fmt.Fprintln(os.Stderr, "walrelay-demo:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "walrelay-demo: %v\nRun 'walrelay-demo --help' for usage.\n", err)
	os.Exit(2)
}

// newCommand is the demo's command line, apart from main so tests can run it in process.
func newCommand() *cobra.Command {
	opts := demo.DefaultOptions()
	cmd := &cobra.Command{
		Use:   "walrelay-demo",
		Short: "Run the relay end to end on a throwaway PostgreSQL and an in-process Kafka",
		Long: "walrelay-demo starts a throwaway PostgreSQL cluster (initdb into a temporary directory,\n" +
			"wal_level=logical, a free port) and an in-process Kafka-protocol broker, migrates, runs the relay,\n" +
			"writes sample orders through the outbox package (one transaction rolled back), consumes them back\n" +
			"from Kafka, prints each with its commit-to-consume latency and a summary, and removes everything\n" +
			"on exit.",
		Args:          cobra.NoArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Events <= 0 {
				return fmt.Errorf("--events must be positive")
			}
			if opts.Rate < 0 {
				return fmt.Errorf("--rate must not be negative")
			}
			opts.Out = cmd.OutOrStdout()
			if err := demo.Run(cmd.Context(), opts); err != nil {
				return runtimeError{err}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&opts.Events, "events", opts.Events, "orders to write")
	cmd.Flags().Float64Var(&opts.Rate, "rate", opts.Rate, "orders per second (0: as fast as one writer goes)")
	cmd.Flags().BoolVar(&opts.Verbose, "verbose", opts.Verbose, "show the relay's own logs")
	return cmd
}
