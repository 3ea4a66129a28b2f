package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/pflag"

	"github.com/walrelay/walrelay/settings"
)

// checkConfig is `walrelay run --check`: every setting checked as run checks it
// before opening a connection, and nothing opened, so that a rendered
// configuration (the Helm chart's ConfigMap, deploy/README.md) can be tested
// where no database or broker is. An error exits 2, as run's own would.
func checkConfig(out io.Writer, s *settings.Settings, fs *pflag.FlagSet, only string, logger *slog.Logger) error {
	if len(s.DatabaseNames()) == 0 {
		if only != "" {
			return fmt.Errorf("--database %s: the configuration lists no databases (a file's databases: list)", only)
		}
		cfg, err := s.CheckedConfig(logger)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "configuration valid: slot %s, sink %s\n", cfg.Slot, s.Sinks.Kind)
		return nil
	}
	entries, err := s.Databases(fs)
	if err != nil {
		return err
	}
	if entries, err = namedEntry(entries, only); err != nil {
		return err
	}
	var names []string
	var errs []error
	for _, d := range entries {
		if _, err := d.CheckedConfig(logger.With("database", d.Name())); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.Where(), err))
		}
		names = append(names, d.Name())
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	fmt.Fprintf(out, "configuration valid: databases %s\n", strings.Join(names, ", "))
	return nil
}
