package outbox

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultMessagePrefix is the logical message prefix Emit writes and the relay reads
// (its messages-prefix setting). It is not the relay's own heartbeat prefix.
const DefaultMessagePrefix = "walrelay.event"

// Emitter writes events as transactional logical messages instead of outbox rows:
// the table-less outbox. The message is part of the caller's transaction (it is
// decoded only if the transaction commits, in its place among the transaction's
// changes), and it leaves no row behind to mark, vacuum or delete. The zero value
// writes with DefaultMessagePrefix for the relay's first outbox table.
//
// An event the broker refuses for what it is becomes a row of the outbox table after
// all, for the poller to retry (docs/operations.md, "Table-less outbox"); Table
// names that table when the relay streams several.
type Emitter struct {
	// Prefix is the logical message prefix; the relay's messages-prefix must match.
	Prefix string
	// Table is the outbox table (name or schema.name) a failed event is handed to;
	// empty: the relay's first table.
	Table string
}

// Emit writes e inside the caller's pgx transaction with the default Emitter. An
// empty e.ID is filled with a new UUID (the deduplication id consumers see), and a
// zero e.CreatedAt with the current time.
func Emit(ctx context.Context, tx pgx.Tx, e *Event) error { return Emitter{}.Emit(ctx, tx, e) }

// EmitSQL writes e inside the caller's database/sql transaction; see Emit.
func EmitSQL(ctx context.Context, tx *sql.Tx, e *Event) error {
	return Emitter{}.EmitSQL(ctx, tx, e)
}

// emitSQL writes one transactional logical message. The bytea overload keeps the
// content byte-exact; text would be checked against the database encoding.
const emitSQL = "SELECT pg_logical_emit_message(true, $1, $2::bytea)"

// Emit writes e inside the caller's pgx transaction; see the package function Emit.
func (m Emitter) Emit(ctx context.Context, tx pgx.Tx, e *Event) error {
	prefix, content, err := m.message(e)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, emitSQL, prefix, content); err != nil {
		return fmt.Errorf("emit outbox event %s: %w", e.ID, err)
	}
	return nil
}

// EmitSQL writes e inside the caller's database/sql transaction.
func (m Emitter) EmitSQL(ctx context.Context, tx *sql.Tx, e *Event) error {
	prefix, content, err := m.message(e)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, emitSQL, prefix, content); err != nil {
		return fmt.Errorf("emit outbox event %s: %w", e.ID, err)
	}
	return nil
}

var emitTable = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_$]*\.)?[A-Za-z_][A-Za-z0-9_$]*$`)

// message validates e, fills its ID and CreatedAt, and encodes it.
func (m Emitter) message(e *Event) (string, []byte, error) {
	if err := validate(e); err != nil {
		return "", nil, err
	}
	switch {
	case e.ID == "":
		e.ID = newUUID()
	case !isUUID(e.ID):
		return "", nil, fmt.Errorf("outbox event id %q is not a UUID; leave ID empty to have one generated", e.ID)
	default:
		e.ID = strings.ToLower(e.ID) // the form PostgreSQL and the poller print
	}
	if m.Table != "" && !emitTable.MatchString(m.Table) {
		return "", nil, fmt.Errorf("emitter table %q is not a table name (name or schema.name)", m.Table)
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = time.Now()
	}
	e.CreatedAt = e.CreatedAt.UTC().Truncate(time.Microsecond) // what the message carries
	prefix := m.Prefix
	if prefix == "" {
		prefix = DefaultMessagePrefix
	}
	return prefix, MarshalMessage(e, m.Table), nil
}

// newUUID is a random (version 4) UUID in canonical text form.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
