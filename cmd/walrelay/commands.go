package main

import (
	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/relay"
)

func runCommand() *cobra.Command {
	s := newSettings()
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Relay outbox rows from PostgreSQL to the broker until stopped (SIGINT/SIGTERM)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := s.load(cmd.Flags()); err != nil {
				return err
			}
			logger, err := s.logger()
			if err != nil {
				return err
			}
			s.warn(nil, logger)
			tp, err := tracerProvider(cmd.Context(), logger)
			if err != nil {
				return err
			}
			if tp != nil {
				defer shutdownTracing(tp, logger)
			}
			cfg, err := s.relayConfig(cmd.Context(), logger)
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
			r, err := relay.New(cfg)
			if err != nil {
				return err
			}
			if err := r.Run(cmd.Context()); err != nil {
				return runtimeError{err}
			}
			return nil
		},
	}
	s.register(cmd.Flags())
	return cmd
}
