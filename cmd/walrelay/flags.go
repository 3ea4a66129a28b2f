package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/walrelay/walrelay/internal/suggest"
)

// usageError is a command line that does not parse: main prints the command's usage
// after it.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// flagError makes a flag that does not parse a usage error, naming the nearest flag
// the command has when the one given does not exist.
func flagError(cmd *cobra.Command, err error) error {
	var missing *pflag.NotExistError
	if errors.As(err, &missing) && missing.GetSpecifiedName() != "" {
		var names []string
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				names = append(names, f.Name)
			}
		})
		if near := suggest.Nearest(missing.GetSpecifiedName(), names); near != "" {
			err = fmt.Errorf("%w (did you mean --%s?)", err, near)
		}
	}
	return usageError{err}
}

// usageArgs makes a command's argument errors usage errors.
func usageArgs(args cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := args(cmd, a); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// groupCommand makes c, a command that only holds subcommands, answer an unknown
// subcommand with a usage error naming the nearest one (cobra would print the help
// and exit 0), and print its help when run alone.
func groupCommand(c *cobra.Command) *cobra.Command {
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		var names []string
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				names = append(names, sub.Name())
			}
		}
		err := fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())
		if near := suggest.Nearest(args[0], names); near != "" {
			err = fmt.Errorf("%w (did you mean %q?)", err, near)
		}
		return usageError{err}
	}
	c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	return c
}
