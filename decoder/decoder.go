package decoder

import (
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/outbox"
)

// Kind says what a decoded message means to the relay.
type Kind uint8

const (
	KindSkip     Kind = iota // a message the relay ignores (other tables, Update, Delete, Truncate, Type, Origin, logical Message, Relation of another table)
	KindBegin                // Begin: Message.FinalLSN, Message.CommitTime, Message.Xid set
	KindInsert               // insert into the outbox table: Message.Event filled
	KindCommit               // Commit: Message.CommitLSN, Message.EndLSN, Message.CommitTime set
	KindRelation             // Relation message for the outbox table (cached)
	// KindHandedOver is an insert into the outbox table with retry_after set: a row
	// the poller owns, which the stream must not publish. walrelay inserts such
	// rows to hand a failed event to the poller when the application already
	// deleted it (--on-publish none); streaming it again would skip the backoff
	// and count an extra attempt. The stream-mode poller publishes every row with
	// retry_after set once due, whoever inserted it, so nothing is lost
	// (docs/design.md invariant 2). No other field of the Message is set.
	KindHandedOver
	// KindMessage is a transactional logical message with the decoder's prefix
	// (DecodeMessages): a table-less outbox event, Message.Event and Message.Table
	// filled. It sits between its transaction's Begin and Commit.
	KindMessage
	// KindOutsideMessage is a non-transactional logical message with the decoder's
	// prefix: it is not part of any transaction, so it is no event. No other field
	// of the Message is set.
	KindOutsideMessage
)

func (k Kind) String() string {
	switch k {
	case KindSkip:
		return "skip"
	case KindBegin:
		return "begin"
	case KindInsert:
		return "insert"
	case KindCommit:
		return "commit"
	case KindRelation:
		return "relation"
	case KindHandedOver:
		return "handed-over"
	case KindMessage:
		return "message"
	case KindOutsideMessage:
		return "outside-message"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Message is the decoded form of one pgoutput message. Only the fields that
// belong to Kind are meaningful; Decode zeroes the others.
type Message struct {
	Kind       Kind
	FinalLSN   pglogrepl.LSN // Begin
	CommitLSN  pglogrepl.LSN // Commit: LSN of the commit record
	EndLSN     pglogrepl.LSN // Commit: end of the commit record (the position to confirm)
	CommitTime time.Time     // Begin and Commit, in UTC
	Xid        uint32        // Begin
	Event      outbox.Event  // Insert
	// Table is the index, among the decoder's tables (NewTables), of the table an
	// Insert, a handed-over row or a *RowError is about; 0 with one table.
	Table int
}

// Decoder turns pgoutput messages into Messages for one or several outbox
// tables. It keeps the relation cache of the replication session it decodes, so
// use one Decoder per session and from one goroutine at a time.
type Decoder struct {
	tables []target

	// rels maps a relation OID from a Relation message to its layout. A nil
	// value means the OID was described and belongs to another table; an
	// absent key means no Relation message named it yet.
	rels map[uint32]*relation

	slab []byte // where events' bytes are carved from; see carve
	// tuple holds the spans of every column of the insert being decoded, for
	// tables with placed columns.
	tuple []span

	messages bool   // decode logical messages with prefix (DecodeMessages)
	prefix   string // of the logical messages that are events
}

// Table is one outbox table a decoder reads: where it is and what its columns are
// called.
type Table struct {
	Schema, Name string
	Columns      outbox.Columns
}

// target is a Table as the decoder uses it.
type target struct {
	schema, table string
	qualified     string // schema.table, for errors
	index         int    // in Decoder.tables, reported as Message.Table
	// names are the table's column names by field (columnNames).
	names [numColumns]string
	// placed are the columns read as headers, partition and trace context.
	placed []placed
	// maxHeaders is how many headers the placed columns make at most.
	maxHeaders int
}

// New returns a decoder for inserts into schema.table (e.g. "public", "outbox_events")
// whose columns are named by cols (outbox.DefaultColumns for walrelay's own table).
// With cols.CreatedAt empty, events leave CreatedAt zero for the caller to fill
// with the commit time.
func New(schema, table string, cols outbox.Columns) *Decoder {
	return NewTables([]Table{{Schema: schema, Name: table, Columns: cols}})
}

// NewTables returns a decoder for inserts into each of tables, each with its own
// column names; Message.Table tells which one an insert is for (its index here).
func NewTables(tables []Table) *Decoder {
	d := &Decoder{rels: make(map[uint32]*relation)}
	for i, t := range tables {
		placed := placedOf(t.Columns)
		d.tables = append(d.tables, target{schema: t.Schema, table: t.Name, qualified: t.Schema + "." + t.Name,
			index: i, names: columnNames(t.Columns), placed: placed, maxHeaders: maxHeaders(placed)})
	}
	return d
}

// Decode parses one pgoutput message into m (m is reused by the caller between calls; Decode overwrites the fields the Kind uses).
//
// Decode first resets m, so fields that do not belong to m.Kind are zero,
// also when it returns an error. The strings and payload in m.Event never
// alias data. Errors are *DecodeError, *SchemaError, *RowError or *MessageError.
func (d *Decoder) Decode(data []byte, m *Message) error {
	*m = Message{}
	if len(data) == 0 {
		return &DecodeError{Reason: "empty message (0 bytes)"}
	}
	switch data[0] {
	case 'I':
		return d.decodeInsert(data, m)
	case 'B':
		return decodeBegin(data, m)
	case 'C':
		return decodeCommit(data, m)
	case 'R':
		return d.decodeRelation(data, m)
	case 'M':
		return d.decodeMessage(data, m)
	case 'U', 'D', 'T', 'Y', 'O':
		// Update, Delete, Truncate, Type and Origin: nothing in them concerns
		// the relay.
		return nil
	}
	return unexpectedType(data[0])
}

// pgEpoch is 2000-01-01 00:00:00 UTC in Unix seconds: PostgreSQL timestamps
// count microseconds from there.
const pgEpoch = 946684800

func pgTime(us int64) time.Time {
	return time.Unix(pgEpoch+us/1e6, (us%1e6)*1e3).UTC()
}

// decodeBegin: Byte1('B') Int64 final LSN, Int64 commit timestamp, Int32 xid.
func decodeBegin(data []byte, m *Message) error {
	r := reader{data: data, off: 1}
	lsn, err := r.uint64("final LSN")
	if err != nil {
		return err
	}
	ts, err := r.uint64("commit timestamp")
	if err != nil {
		return err
	}
	xid, err := r.uint32("xid")
	if err != nil {
		return err
	}
	if err := r.end(); err != nil {
		return err
	}
	m.Kind = KindBegin
	m.FinalLSN = pglogrepl.LSN(lsn)
	m.CommitTime = pgTime(int64(ts))
	m.Xid = xid
	return nil
}

// decodeCommit: Byte1('C') Int8 flags, Int64 commit LSN, Int64 end LSN,
// Int64 commit timestamp.
func decodeCommit(data []byte, m *Message) error {
	r := reader{data: data, off: 1}
	if _, err := r.uint8("flags"); err != nil {
		return err
	}
	commit, err := r.uint64("commit LSN")
	if err != nil {
		return err
	}
	end, err := r.uint64("end LSN")
	if err != nil {
		return err
	}
	ts, err := r.uint64("commit timestamp")
	if err != nil {
		return err
	}
	if err := r.end(); err != nil {
		return err
	}
	m.Kind = KindCommit
	m.CommitLSN = pglogrepl.LSN(commit)
	m.EndLSN = pglogrepl.LSN(end)
	m.CommitTime = pgTime(int64(ts))
	return nil
}

// unexpectedType explains message types walrelay never asks for.
func unexpectedType(t byte) error {
	var what string
	switch t {
	case 'S':
		what = "Stream Start, protocol version 2"
	case 'E':
		what = "Stream Stop, protocol version 2"
	case 'c':
		what = "Stream Commit, protocol version 2"
	case 'A':
		what = "Stream Abort, protocol version 2"
	case 'b', 'P', 'K', 'r', 'p':
		what = "two-phase commit, protocol version 3"
	default:
		return &DecodeError{MsgType: t, Reason: "unknown message type; walrelay requests pgoutput protocol version 1 and did not expect it"}
	}
	return &DecodeError{MsgType: t, Reason: what + "; walrelay requests pgoutput protocol version 1 and did not expect this message type " +
		"(start replication with proto_version '1' and without the streaming or two_phase options)"}
}
