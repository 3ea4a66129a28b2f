package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/walrelay/walrelay/admin"
	"github.com/walrelay/walrelay/internal/procs"
	"github.com/walrelay/walrelay/internal/startpages"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/settings"
)

func runCommand() *cobra.Command {
	s := newSettings()
	var only string
	var check bool
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Relay outbox rows from PostgreSQL to the broker until stopped (SIGINT/SIGTERM)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := s.Load(cmd.Flags()); err != nil {
				return err
			}
			logger, err := s.Logger()
			if err != nil {
				return err
			}
			s.Warn(nil, logger)
			if check {
				return checkConfig(cmd.OutOrStdout(), s, cmd.Flags(), only, logger)
			}
			stopAdapting := adaptProcs(cmd.Context(), logger)
			defer stopAdapting()
			tp, err := tracerProvider(cmd.Context(), logger)
			if err != nil {
				return err
			}
			if tp != nil {
				defer shutdownTracing(tp, logger)
			}
			if len(s.DatabaseNames()) > 0 {
				return runDatabases(cmd.Context(), s, cmd.Flags(), only, logger, tp)
			}
			if only != "" {
				return fmt.Errorf("--database %s: the configuration lists no databases (a file's databases: list)", only)
			}
			cfg, err := s.RelayConfig(cmd.Context(), logger)
			if tp != nil {
				cfg.TracerProvider = tp
			}
			if cfg.Sink != nil {
				defer cfg.Sink.Close()
			}
			if err != nil {
				if cmd.Context().Err() != nil {
					return nil // stopped before the broker could be reached
				}
				return err
			}
			cfg.OnStream = releaseAgain(logger)
			r, err := relay.New(cfg)
			if err != nil {
				return err
			}
			releaseStartPages(logger)
			if err := serveWhile(cmd.Context(), r.Run, func(ctx context.Context) error { return admin.Serve(ctx, r, s.Admin) }); err != nil {
				return runtimeError{err}
			}
			return nil
		},
	}
	s.Register(cmd.Flags())
	cmd.Flags().StringVar(&only, "database", "", "with a file's databases list: run this database of it alone (empty: all)")
	cmd.Flags().BoolVar(&check, "check", false, "check the configuration and exit (0: valid, 2: not), connecting to nothing")
	groupedHelp(cmd)
	return cmd
}

// adaptProcs runs the relay on one processor while its load fits on one
// (internal/procs), unless GOMAXPROCS is set in the environment: then the operator's
// count stands. The returned function stops adapting and restores the default.
func adaptProcs(ctx context.Context, logger *slog.Logger) (stop func()) {
	if os.Getenv("GOMAXPROCS") != "" {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		procs.Adapt(ctx, procs.DefaultPolicy, logger)
	}()
	return func() { cancel(); <-done }
}

// releaseStartPages gives back the executable's pages that start-up alone touched
// (every linked sink's init, the settings, the help texts): about half the drain's
// peak resident set otherwise (internal/startpages, docs/performance.md, "Memory").
func releaseStartPages(logger *slog.Logger) {
	n, err := startpages.Release()
	if err != nil {
		logger.Debug("start-up pages kept", "error", err)
		return
	}
	logger.Debug("start-up pages given back", "mapped_bytes", n)
}

// releaseAgain returns a relay.Config.OnStream that gives the executable's pages back
// once more when the relay first streams: connecting, preflight, slot creation and
// a catch-up pass touched pages the stream does not use (docs/performance.md).
func releaseAgain(logger *slog.Logger) func() {
	var once sync.Once
	return func() { once.Do(func() { releaseStartPages(logger) }) }
}

// runDatabases runs one relay per entry of the file's databases list (or the one
// --database names) in this process, until ctx ends. Every entry is checked before
// any connection is opened.
func runDatabases(ctx context.Context, s *settings.Settings, fs *pflag.FlagSet, only string, logger *slog.Logger, tp *sdktrace.TracerProvider) error {
	entries, err := s.Databases(fs)
	if err != nil {
		return err
	}
	if entries, err = namedEntry(entries, only); err != nil {
		return err
	}
	dbs := make([]relay.Database, 0, len(entries))
	var errs []error
	for _, d := range entries {
		log := logger.With("database", d.Name())
		cfg, err := d.CheckedConfig(log)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.Where(), err))
		}
		if tp != nil {
			cfg.TracerProvider = tp
		}
		cfg.Logger = log
		dbs = append(dbs, relay.Database{Name: d.Name(), Config: cfg})
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for i := range dbs {
		cfg, err := entries[i].OpenSink(ctx, dbs[i].Config, dbs[i].Config.Logger)
		if cfg.Sink != nil {
			defer cfg.Sink.Close()
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil // stopped before the broker could be reached
			}
			return fmt.Errorf("database %s: %w", dbs[i].Name, err)
		}
		dbs[i].Config = cfg
	}
	again := releaseAgain(logger)
	for i := range dbs {
		dbs[i].Config.OnStream = again
	}
	g, err := relay.NewGroup(relay.GroupConfig{Logger: logger}, dbs)
	if err != nil {
		return err
	}
	releaseStartPages(logger)
	if err := serveWhile(ctx, g.Run, func(ctx context.Context) error { return admin.ServeGroup(ctx, g, s.Admin) }); err != nil {
		return runtimeError{err}
	}
	return nil
}

// serveWhile runs run, and serve beside it until run returns: the listener lives
// as long as the relay. A listener that cannot start stops the relay; the error is
// run's, joined with serve's.
func serveWhile(ctx context.Context, run, serve func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() {
		err := serve(ctx)
		if err != nil {
			cancel()
		}
		served <- err
	}()
	err := run(ctx)
	cancel()
	return errors.Join(err, <-served)
}
