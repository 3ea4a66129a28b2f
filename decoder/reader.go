package decoder

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// reader walks one message. off counts from the message's first byte (the
// type), so offsets in errors match what a hex dump of the payload shows.
type reader struct {
	data []byte
	off  int
}

func (r *reader) left() int { return len(r.data) - r.off }

// errorf builds a DecodeError at offset off. Only error paths call it.
func (r *reader) errorf(off int, format string, args ...any) error {
	return &DecodeError{MsgType: r.data[0], Offset: off, Reason: fmt.Sprintf(format, args...)}
}

func (r *reader) short(what string, n int) error {
	return r.errorf(r.off, "%s (%d bytes) runs past end of message (%d bytes)", what, n, len(r.data))
}

func (r *reader) uint8(what string) (byte, error) {
	if r.left() < 1 {
		return 0, r.short(what, 1)
	}
	v := r.data[r.off]
	r.off++
	return v, nil
}

func (r *reader) int16(what string) (int16, error) {
	if r.left() < 2 {
		return 0, r.short(what, 2)
	}
	v := int16(binary.BigEndian.Uint16(r.data[r.off:]))
	r.off += 2
	return v, nil
}

func (r *reader) uint32(what string) (uint32, error) {
	if r.left() < 4 {
		return 0, r.short(what, 4)
	}
	v := binary.BigEndian.Uint32(r.data[r.off:])
	r.off += 4
	return v, nil
}

func (r *reader) uint64(what string) (uint64, error) {
	if r.left() < 8 {
		return 0, r.short(what, 8)
	}
	v := binary.BigEndian.Uint64(r.data[r.off:])
	r.off += 8
	return v, nil
}

// cstring returns a NUL-terminated string without its terminator; the
// result aliases the message.
func (r *reader) cstring(what string) ([]byte, error) {
	i := bytes.IndexByte(r.data[r.off:], 0)
	if i < 0 {
		return nil, r.errorf(r.off, "%s has no NUL terminator before end of message (%d bytes)", what, len(r.data))
	}
	s := r.data[r.off : r.off+i]
	r.off += i + 1
	return s, nil
}

// end reports bytes left over after the last field of a message.
func (r *reader) end() error {
	if r.off != len(r.data) {
		return r.errorf(r.off, "%d unexpected bytes after the last field (message is %d bytes)", r.left(), len(r.data))
	}
	return nil
}
