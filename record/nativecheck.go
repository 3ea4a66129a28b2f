package record

import (
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The checks a native payload passes before it is framed (native.go) walk its
// bytes against the writer schema without building values, so without
// allocating: a full decode would cost a value per field for a verdict the walk
// gives as well. Avro: every value is well formed for its type (varint lengths,
// union and enum indexes in range, booleans 0 or 1, lengths within the payload)
// and the bytes end where the schema does. Protobuf: well formed wire format,
// each known field in its declared wire type (packed lists as bytes), nested
// messages checked alike, proto3 strings valid UTF-8; unknown fields are allowed,
// as a decoder keeps them, proto2's required fields present. What neither checks: that values mean what the
// consumer expects (a field written under another number of the same type).

// maxNativeDepth bounds nesting (recursive schemas), as decoders do.
const maxNativeDepth = 100

var errAvroShort = errors.New("the bytes end inside a value")

// checkAvroBytes reports whether p is exactly one value of s in Avro binary.
func checkAvroBytes(s avro.Schema, p []byte) error {
	rest, err := walkAvro(s, p, 0)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("%d bytes are left after the value", len(rest))
	}
	return nil
}

// avroLong reads a zigzag varint of at most max bytes.
func avroLong(p []byte, max int) (int64, []byte, error) {
	var u uint64
	for i := 0; i < max; i++ {
		if i >= len(p) {
			return 0, nil, errAvroShort
		}
		u |= uint64(p[i]&0x7f) << (7 * i)
		if p[i] < 0x80 {
			return int64(u>>1) ^ -int64(u&1), p[i+1:], nil
		}
	}
	return 0, nil, fmt.Errorf("a varint longer than %d bytes", max)
}

func walkAvro(s avro.Schema, p []byte, depth int) ([]byte, error) {
	if depth > maxNativeDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxNativeDepth)
	}
	switch s := s.(type) {
	case *avro.RefSchema:
		return walkAvro(s.Schema(), p, depth+1)
	case *avro.RecordSchema:
		var err error
		for _, f := range s.Fields() {
			if p, err = walkAvro(f.Type(), p, depth+1); err != nil {
				return nil, fmt.Errorf("field %s: %w", f.Name(), err)
			}
		}
		return p, nil
	case *avro.EnumSchema:
		i, rest, err := avroLong(p, 5)
		if err == nil && (i < 0 || i >= int64(len(s.Symbols()))) {
			err = fmt.Errorf("enum %s index %d out of range", s.FullName(), i)
		}
		return rest, err
	case *avro.UnionSchema:
		i, rest, err := avroLong(p, 10)
		if err != nil {
			return nil, err
		}
		if i < 0 || i >= int64(len(s.Types())) {
			return nil, fmt.Errorf("union index %d out of range", i)
		}
		return walkAvro(s.Types()[i], rest, depth+1)
	case *avro.FixedSchema:
		if len(p) < s.Size() {
			return nil, errAvroShort
		}
		return p[s.Size():], nil
	case *avro.ArraySchema:
		return walkAvroBlocks(p, depth, func(p []byte) ([]byte, error) { return walkAvro(s.Items(), p, depth+1) })
	case *avro.MapSchema:
		return walkAvroBlocks(p, depth, func(p []byte) ([]byte, error) {
			p, err := walkAvroBytes(p, true)
			if err != nil {
				return nil, err
			}
			return walkAvro(s.Values(), p, depth+1)
		})
	case *avro.NullSchema:
		return p, nil
	case *avro.PrimitiveSchema:
		switch s.Type() {
		case avro.Boolean:
			if len(p) < 1 {
				return nil, errAvroShort
			}
			if p[0] > 1 {
				return nil, fmt.Errorf("boolean byte %d is not 0 or 1", p[0])
			}
			return p[1:], nil
		case avro.Int:
			v, rest, err := avroLong(p, 5)
			if err == nil && (v < math.MinInt32 || v > math.MaxInt32) {
				err = errors.New("an int out of range")
			}
			return rest, err
		case avro.Long:
			_, rest, err := avroLong(p, 10)
			return rest, err
		case avro.Float:
			if len(p) < 4 {
				return nil, errAvroShort
			}
			return p[4:], nil
		case avro.Double:
			if len(p) < 8 {
				return nil, errAvroShort
			}
			return p[8:], nil
		case avro.String:
			return walkAvroBytes(p, true)
		case avro.Bytes:
			return walkAvroBytes(p, false)
		}
	}
	return nil, fmt.Errorf("schema type %s is not checked", s.Type())
}

// walkAvroBytes skips a length-prefixed string or bytes; a string is UTF-8.
func walkAvroBytes(p []byte, text bool) ([]byte, error) {
	n, rest, err := avroLong(p, 10)
	if err != nil {
		return nil, err
	}
	if n < 0 || n > int64(len(rest)) {
		return nil, fmt.Errorf("a length of %d with %d bytes left", n, len(rest))
	}
	if text && !utf8.Valid(rest[:n]) {
		return nil, errors.New("a string that is not UTF-8")
	}
	return rest[n:], nil
}

// maxAvroEmptyItems bounds the items of an array or map that take no bytes (of
// null), which a count alone could make endless.
const maxAvroEmptyItems = 1 << 20

// walkAvroBlocks skips an array's or a map's blocks, each item through item.
func walkAvroBlocks(p []byte, depth int, item func([]byte) ([]byte, error)) ([]byte, error) {
	total := int64(0)
	for {
		count, rest, err := avroLong(p, 10)
		if err != nil {
			return nil, err
		}
		p = rest
		if count == 0 {
			return p, nil
		}
		if count < 0 {
			if count == math.MinInt64 {
				return nil, errors.New("a block count out of range")
			}
			count = -count
			size, rest, err := avroLong(p, 10)
			if err != nil {
				return nil, err
			}
			if size < 0 || size > int64(len(rest)) {
				return nil, fmt.Errorf("a block of %d bytes with %d left", size, len(rest))
			}
			p = rest
		}
		if total += count; total > int64(len(p))+maxAvroEmptyItems {
			return nil, fmt.Errorf("a block of %d items with %d bytes left", count, len(p))
		}
		for i := int64(0); i < count; i++ {
			if p, err = item(p); err != nil {
				return nil, err
			}
		}
	}
}

// checkProtoBytes reports whether p is well formed for md (see above).
func checkProtoBytes(md protoreflect.MessageDescriptor, p []byte) error {
	return walkProto(md, p, 0)
}

func walkProto(md protoreflect.MessageDescriptor, p []byte, depth int) error {
	if depth > maxNativeDepth {
		return fmt.Errorf("nested deeper than %d", maxNativeDepth)
	}
	utf8Strings := md.ParentFile().Syntax() == protoreflect.Proto3
	fields := md.Fields()
	// proto2's required fields must be there, or a decoder refuses the message:
	// a bit each, for the first 64. (proto3 has none; asking costs an allocation.)
	var required protoreflect.FieldNumbers
	nreq := 0
	if !utf8Strings {
		required = md.RequiredNumbers()
		nreq = min(required.Len(), 64)
	}
	var seen uint64
	for len(p) > 0 {
		num, typ, n := protowire.ConsumeTag(p)
		if n < 0 {
			return fmt.Errorf("%s: %w", md.FullName(), protowire.ParseError(n))
		}
		if num > protowire.MaxValidNumber {
			return fmt.Errorf("%s: field number %d out of range", md.FullName(), num)
		}
		p = p[n:]
		m := protowire.ConsumeFieldValue(num, typ, p)
		if m < 0 {
			return fmt.Errorf("%s field %d: %w", md.FullName(), num, protowire.ParseError(m))
		}
		for i := 0; i < nreq; i++ {
			if required.Get(i) == num {
				seen |= 1 << i
			}
		}
		if fd := fields.ByNumber(num); fd != nil {
			if err := checkProtoField(fd, typ, p[:m], utf8Strings, depth); err != nil {
				return fmt.Errorf("%s field %s: %w", md.FullName(), fd.Name(), err)
			}
		}
		p = p[m:]
	}
	for i := 0; i < nreq; i++ {
		if seen&(1<<i) == 0 {
			return fmt.Errorf("%s: required field %s is missing", md.FullName(), fields.ByNumber(required.Get(i)).Name())
		}
	}
	return nil
}

func checkProtoField(fd protoreflect.FieldDescriptor, typ protowire.Type, v []byte, utf8Strings bool, depth int) error {
	want := wireTypeOf(fd.Kind())
	if typ != want {
		if fd.IsList() && typ == protowire.BytesType && want != protowire.BytesType && want != protowire.StartGroupType {
			return checkPacked(want, v)
		}
		return fmt.Errorf("wire type %d where %s needs %d", typ, fd.Kind(), want)
	}
	if typ != protowire.BytesType {
		return nil
	}
	b, _ := protowire.ConsumeBytes(v)
	switch fd.Kind() {
	case protoreflect.MessageKind:
		return walkProto(fd.Message(), b, depth+1)
	case protoreflect.StringKind:
		if utf8Strings && !utf8.Valid(b) {
			return errors.New("a string that is not UTF-8")
		}
	}
	return nil
}

// checkPacked checks a packed list of scalars of wire type want.
func checkPacked(want protowire.Type, v []byte) error {
	b, _ := protowire.ConsumeBytes(v)
	switch want {
	case protowire.Fixed32Type:
		if len(b)%4 != 0 {
			return errors.New("a packed list of 32-bit values cut short")
		}
	case protowire.Fixed64Type:
		if len(b)%8 != 0 {
			return errors.New("a packed list of 64-bit values cut short")
		}
	default:
		for len(b) > 0 {
			_, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
		}
	}
	return nil
}

func wireTypeOf(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind:
		return protowire.BytesType
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	}
	return protowire.VarintType
}
