package poller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/walrelay/walrelay/outbox"
)

// Table-less outbox events (outbox.Emit) have no row. One the broker refuses for
// what it is gets a row through RecordFailures, whose insert makes it the poller's
// like any handed-over row; one that can never be published gets a dead-letter row
// here. Both inserts set retry_after, so the stream takes them for the poller's
// (decoder.KindHandedOver) and never publishes them itself.

// Holds reports whether the table's payload column can store payload as it is:
// JSON for a json or jsonb column, UTF-8 without NUL for text, anything for bytea.
func (s *Store) Holds(payload []byte) bool {
	switch s.cols.shape.PayloadType {
	case "bytea":
		return true
	case "text":
		return utf8.Valid(payload) && bytes.IndexByte(payload, 0) < 0
	}
	return json.Valid(payload)
}

// Table is the store's table, schema-qualified, as outbox.Event.Table names it.
func (s *Store) Table() string { return s.qualified }

// InsertDeadLetter inserts e as a dead letter with the reason, in its own committed
// statement; a row with its id already there (the message was streamed again after
// a crash) is left as it is. e.Payload must be one the table Holds.
func (s *Store) InsertDeadLetter(ctx context.Context, e *outbox.Event, reason error) error {
	names, values := s.rowColumns(7)
	args := []any{e.ID, e.AggregateType, e.AggregateID, e.EventType, s.payloadArg(e), truncate(reason.Error(), 2000)}
	args = append(args, s.rowTail(e)...)
	_, err := s.pool.Exec(ctx, `INSERT INTO `+s.table+` (`+names+`, attempts, last_error, retry_after, dead_lettered_at)
		OVERRIDING SYSTEM VALUE VALUES (`+values+`, 1, $6, now(), now())
		ON CONFLICT (`+s.conflictKey()+`) DO NOTHING`, args...)
	if err != nil {
		return fmt.Errorf("insert dead letter %s into %s: %w", e.ID, s.qualified, err)
	}
	return nil
}
