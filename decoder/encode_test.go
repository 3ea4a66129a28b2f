package decoder_test

import (
	"encoding/binary"
	"time"
)

// This file encodes pgoutput protocol version 1 messages the way PostgreSQL
// writes them (see "Logical Replication Message Formats" in the PostgreSQL
// docs), so tests can build exact bytes. TestEncoderAgreesWithPglogrepl
// checks it against an independent parser.

// enc appends big-endian fields.
type enc []byte

func (e enc) u8(v byte) enc        { return append(e, v) }
func (e enc) i16(v int16) enc      { return binary.BigEndian.AppendUint16(e, uint16(v)) }
func (e enc) i32(v int32) enc      { return binary.BigEndian.AppendUint32(e, uint32(v)) }
func (e enc) u32(v uint32) enc     { return binary.BigEndian.AppendUint32(e, v) }
func (e enc) u64(v uint64) enc     { return binary.BigEndian.AppendUint64(e, v) }
func (e enc) str(s string) enc     { return append(append(e, s...), 0) }
func (e enc) raw(b []byte) enc     { return append(e, b...) }
func (e enc) bytes() []byte        { return []byte(e) }
func (e enc) time(t time.Time) enc { return e.u64(uint64(pgMicros(t))) }

// pgMicros is t in microseconds since 2000-01-01 00:00:00 UTC.
func pgMicros(t time.Time) int64 {
	return t.Sub(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).Microseconds()
}

// PostgreSQL type OIDs used in Relation messages.
const (
	oidText        = 25
	oidJSON        = 114
	oidVarchar     = 1043
	oidTimestamptz = 1184
	oidUUID        = 2950
	oidJSONB       = 3802
	oidInt8        = 20
)

func beginMsg(finalLSN uint64, commit time.Time, xid uint32) []byte {
	return enc{'B'}.u64(finalLSN).time(commit).u32(xid).bytes()
}

func commitMsg(flags byte, commitLSN, endLSN uint64, commit time.Time) []byte {
	return enc{'C'}.u8(flags).u64(commitLSN).u64(endLSN).time(commit).bytes()
}

// relCol is one column of a Relation message.
type relCol struct {
	name   string
	typ    uint32
	typmod int32
	key    bool // part of the replica identity (flags bit 1)
}

func relationMsg(oid uint32, namespace, name string, cols []relCol) []byte {
	e := enc{'R'}.u32(oid).str(namespace).str(name).u8('d').i16(int16(len(cols)))
	for _, c := range cols {
		var flags byte
		if c.key {
			flags = 1
		}
		e = e.u8(flags).str(c.name).u32(c.typ).i32(c.typmod)
	}
	return e.bytes()
}

// val is one TupleData column.
type val struct {
	kind byte // 'n', 'u', 't', 'b'
	data string
}

func text(s string) val   { return val{kind: 't', data: s} }
func binval(s string) val { return val{kind: 'b', data: s} }

var (
	null  = val{kind: 'n'}
	toast = val{kind: 'u'}
)

func (e enc) tuple(vals []val) enc {
	e = e.i16(int16(len(vals)))
	for _, v := range vals {
		e = e.u8(v.kind)
		if v.kind == 't' || v.kind == 'b' {
			e = e.i32(int32(len(v.data))).raw([]byte(v.data))
		}
	}
	return e
}

func insertMsg(oid uint32, vals []val) []byte {
	return enc{'I'}.u32(oid).u8('N').tuple(vals).bytes()
}

// updateMsg encodes an Update; oldKind is 0 (no old tuple), 'K' or 'O'.
func updateMsg(oid uint32, oldKind byte, old, vals []val) []byte {
	e := enc{'U'}.u32(oid)
	if oldKind != 0 {
		e = e.u8(oldKind).tuple(old)
	}
	return e.u8('N').tuple(vals).bytes()
}

// deleteMsg encodes a Delete; oldKind is 'K' or 'O'.
func deleteMsg(oid uint32, oldKind byte, old []val) []byte {
	return enc{'D'}.u32(oid).u8(oldKind).tuple(old).bytes()
}

// truncateMsg encodes a Truncate; options bit 1 is CASCADE, bit 2 RESTART IDENTITY.
func truncateMsg(options byte, oids ...uint32) []byte {
	e := enc{'T'}.i32(int32(len(oids))).u8(options)
	for _, o := range oids {
		e = e.u32(o)
	}
	return e.bytes()
}

func typeMsg(oid uint32, namespace, name string) []byte {
	return enc{'Y'}.u32(oid).str(namespace).str(name).bytes()
}

func originMsg(lsn uint64, name string) []byte {
	return enc{'O'}.u64(lsn).str(name).bytes()
}

func logicalMsg(transactional bool, lsn uint64, prefix string, content []byte) []byte {
	var flags byte
	if transactional {
		flags = 1
	}
	return enc{'M'}.u8(flags).u64(lsn).str(prefix).i32(int32(len(content))).raw(content).bytes()
}

// Protocol version 2 streaming messages, which walrelay must reject.

func streamStartMsg(xid uint32, first bool) []byte {
	var f byte
	if first {
		f = 1
	}
	return enc{'S'}.u32(xid).u8(f).bytes()
}

func streamStopMsg() []byte { return []byte{'E'} }

func streamCommitMsg(xid uint32, commitLSN, endLSN uint64, commit time.Time) []byte {
	return enc{'c'}.u32(xid).u8(0).u64(commitLSN).u64(endLSN).time(commit).bytes()
}

func streamAbortMsg(xid, subxid uint32) []byte {
	return enc{'A'}.u32(xid).u32(subxid).bytes()
}
