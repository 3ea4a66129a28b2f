// Command walrelay relays the rows an application writes to its PostgreSQL outbox
// table to a broker (Kafka, NATS JetStream, RabbitMQ or Redis Streams), reading them
// from the WAL through a logical replication slot, or polling the table.
//
// Exit codes: 0 success, 1 runtime failure, 2 bad usage or configuration (reported
// before any connection is opened); `walrelay status` has codes of its own per
// problem (docs/configuration.md).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/internal/buildinfo"
)

// runtimeError marks a failure after the configuration was accepted: exit code 1.
type runtimeError struct{ err error }

func (e runtimeError) Error() string { return e.err.Error() }
func (e runtimeError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// newRoot builds the command tree.
func newRoot() *cobra.Command {
	root := groupCommand(&cobra.Command{
		Use:   "walrelay",
		Short: "Relay PostgreSQL outbox rows to Kafka, NATS JetStream, RabbitMQ, Redis Streams, Amazon SQS, Google Pub/Sub or HTTP",
		Long: "walrelay publishes every row committed to the outbox table to a broker (Kafka, NATS JetStream,\n" +
			"RabbitMQ, Redis Streams, Amazon SQS, Google Pub/Sub) or an HTTP endpoint (signed webhooks),\n" +
			"at least once and in commit order per aggregate, reading inserts from the WAL through a logical\n" +
			"replication slot (or polling the table, --mode poll).\n\n" +
			"Settings come from flags, WALRELAY_* environment variables and an optional YAML file (--config),\n" +
			"in that order of precedence.",
		Version:       buildinfo.Read().String(),
		SilenceErrors: true,
		SilenceUsage:  true,
	})
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(runCommand(), migrateCommand(), statusCommand(), pauseCommand(), resumeCommand(), replayCommand(), dlqCommand(), demoCommand(),
		importDebeziumCommand(),
		versionCommand())
	root.SetFlagErrorFunc(flagError)
	var withUsageArgs func(*cobra.Command)
	withUsageArgs = func(c *cobra.Command) {
		if c.Args != nil {
			c.Args = usageArgs(c.Args)
		}
		for _, sub := range c.Commands() {
			withUsageArgs(sub)
		}
	}
	for _, c := range root.Commands() {
		withUsageArgs(c)
	}
	return root
}

// execute runs one command line and returns the process's exit code.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	err = redactLoaded(err)
	var verdict statusFailed
	if errors.As(err, &verdict) { // status printed its report
		return verdict.code
	}
	var rt runtimeError
	if errors.As(err, &rt) {
		fmt.Fprintln(stderr, "walrelay:", redactLoaded(explain(err)))
		return 1
	}
	var usage usageError
	if errors.As(err, &usage) {
		// The mistake and where help is, not the whole flag list.
		fmt.Fprintf(stderr, "walrelay: %v\nRun '%s --help' for usage.\n", err, cmd.CommandPath())
		return 2
	}
	fmt.Fprintf(stderr, "walrelay: %v\nRun '%s --help' for usage.\n", err, cmd.CommandPath())
	return 2
}

func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print walrelay's version, VCS revision and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), buildinfo.Read())
			return nil
		},
	}
}
