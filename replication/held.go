package replication

import (
	"bytes"
	"context"
	"errors"
)

// Held is what a Handler's HandleWAL returns when it cannot take a message yet (an
// event whose schema the registry has still to give, docs/design.md "Schema
// registry"): the stream keeps a copy of the message, reads nothing more while
// Until is paused, sending standby status updates as it does while paused, then
// hands the same message to HandleWAL again. HandleWAL must have done nothing
// with a message it holds.
type Held struct {
	Until *Pause
}

func (h *Held) Error() string { return "message held" }

// hand gives data to the handler, or keeps a copy when the handler holds it.
func (s *stream) hand(ctx context.Context, data []byte) error {
	err := s.h.HandleWAL(ctx, data)
	var held *Held
	if errors.As(err, &held) {
		s.held, s.heldBy = bytes.Clone(data), held.Until
		return nil
	}
	return err
}
