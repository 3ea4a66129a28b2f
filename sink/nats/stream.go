package nats

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ensureStream creates the stream when it is missing; created reports whether
// this call created it. An existing stream is left as it is.
func (s *Sink) ensureStream(ctx context.Context) (created bool, err error) {
	_, err = s.js.Stream(ctx, s.cfg.Stream)
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return false, fmt.Errorf("look up stream %s: %w", s.cfg.Stream, err)
	}
	_, err = s.js.CreateStream(ctx, jetstream.StreamConfig{
		Name:        s.cfg.Stream,
		Description: "walrelay outbox events",
		Subjects:    []string{s.filter},
		Storage:     jetstream.FileStorage,
		Duplicates:  s.cfg.DedupWindow,
	})
	switch {
	case errors.Is(err, jetstream.ErrStreamNameAlreadyInUse):
		return false, nil // another relay created it meanwhile
	case err != nil:
		return false, fmt.Errorf("create stream %s capturing %s: %w", s.cfg.Stream, s.filter, err)
	}
	return true, nil
}

// checkStream makes sure the configured stream exists, creating it when allowed.
func (s *Sink) checkStream(ctx context.Context) error {
	if s.cfg.CreateStream {
		_, err := s.ensureStream(ctx)
		return err
	}
	_, err := s.js.Stream(ctx, s.cfg.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("stream %s does not exist: create it with subjects that capture %q, or set CreateStream", s.cfg.Stream, s.cfg.SubjectTemplate)
	}
	if err != nil {
		return fmt.Errorf("stream %s: %w", s.cfg.Stream, err)
	}
	return nil
}

// resolve explains no responders on subject. nil: the stream was just created,
// send again now. Otherwise an error for classify: errNoStream (an event error),
// errStreamSilent (transient), or why the lookup failed.
func (s *Sink) resolve(ctx context.Context, subject string) error {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	name, err := s.js.StreamNameBySubject(ctx, subject)
	switch {
	case err == nil:
		return fmt.Errorf("%w (stream %s)", errStreamSilent, name)
	case errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("look up the stream for subject %q: %w", subject, jetstream.ErrJetStreamNotEnabled)
	case !errors.Is(err, jetstream.ErrStreamNotFound):
		return fmt.Errorf("look up the stream for subject %q: %w", subject, err)
	}
	if s.cfg.CreateStream && captures(s.filter, subject) {
		created, err := s.ensureStream(ctx)
		if err != nil {
			return err
		}
		if created {
			return nil
		}
	}
	return fmt.Errorf("%w; add it to the subjects of stream %s or change the subject template", errNoStream, s.cfg.Stream)
}
