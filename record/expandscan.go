package record

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// maxDepth bounds the recursion, at encoding/json's nesting limit.
const maxDepth = 10000

// treeScanner reads one JSON value into nodes in a single pass over the bytes,
// without json.Decoder's tokens (each boxed in an interface) or its scanner's
// state machine: the expanded payload is parsed on the stream's goroutine for
// every event (docs/performance.md, "Schema registry converters"). It accepts
// and rejects what encoding/json does; FuzzScanTree compares the two.
type treeScanner struct {
	p []byte
	i int
}

func (s *treeScanner) space() {
	for s.i < len(s.p) {
		switch s.p[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *treeScanner) value(depth int) (*node, error) {
	s.space()
	if s.i >= len(s.p) {
		return nil, errNotExpandable
	}
	switch c := s.p[s.i]; {
	case c == '{':
		if depth >= maxDepth {
			return nil, errNotExpandable
		}
		s.i++
		n := &node{kind: kStruct}
		s.space()
		if s.i < len(s.p) && s.p[s.i] == '}' {
			s.i++
			return n, nil
		}
		for {
			s.space()
			if s.i >= len(s.p) || s.p[s.i] != '"' {
				return nil, errNotExpandable
			}
			name, err := s.str()
			if err != nil {
				return nil, err
			}
			s.space()
			if s.i >= len(s.p) || s.p[s.i] != ':' {
				return nil, errNotExpandable
			}
			s.i++
			kid, err := s.value(depth + 1)
			if err != nil {
				return nil, err
			}
			replaced := false
			for i, have := range n.names {
				if have == name {
					n.kids[i], replaced = kid, true
					break
				}
			}
			if !replaced {
				n.names = append(n.names, name)
				n.kids = append(n.kids, kid)
			}
			s.space()
			if s.i >= len(s.p) {
				return nil, errNotExpandable
			}
			switch s.p[s.i] {
			case ',':
				s.i++
			case '}':
				s.i++
				return n, nil
			default:
				return nil, errNotExpandable
			}
		}
	case c == '[':
		if depth >= maxDepth {
			return nil, errNotExpandable
		}
		s.i++
		n := &node{kind: kArray}
		s.space()
		if s.i < len(s.p) && s.p[s.i] == ']' {
			s.i++
			return n, nil
		}
		for {
			kid, err := s.value(depth + 1)
			if err != nil {
				return nil, err
			}
			n.kids = append(n.kids, kid)
			s.space()
			if s.i >= len(s.p) {
				return nil, errNotExpandable
			}
			switch s.p[s.i] {
			case ',':
				s.i++
			case ']':
				s.i++
				return n, nil
			default:
				return nil, errNotExpandable
			}
		}
	case c == '"':
		text, err := s.str()
		if err != nil {
			return nil, err
		}
		return &node{kind: kString, text: text}, nil
	case c == 't':
		return s.literal("true", &node{kind: kBool, b: true})
	case c == 'f':
		return s.literal("false", &node{kind: kBool})
	case c == 'n':
		return s.literal("null", &node{kind: kBytes})
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return nil, errNotExpandable
}

func (s *treeScanner) literal(word string, n *node) (*node, error) {
	if !strings.HasPrefix(string(s.p[s.i:min(s.i+len(word), len(s.p))]), word) {
		return nil, errNotExpandable
	}
	s.i += len(word)
	return n, nil
}

// str reads a string at s.i (its opening quote). Plain ASCII without escapes is
// copied as it is; anything else goes through encoding/json's unquoting, so that
// escapes, surrogates and invalid UTF-8 come out as they did.
func (s *treeScanner) str() (string, error) {
	start := s.i
	s.i++
	plain := true
	for s.i < len(s.p) {
		c := s.p[s.i]
		switch {
		case c == '"':
			s.i++
			if plain {
				return string(s.p[start+1 : s.i-1]), nil
			}
			var out string
			if err := json.Unmarshal(s.p[start:s.i], &out); err != nil {
				return "", errNotExpandable
			}
			return out, nil
		case c == '\\':
			plain = false
			s.i += 2
		case c < 0x20:
			return "", errNotExpandable
		case c >= 0x80:
			plain = false
			s.i++
		default:
			s.i++
		}
	}
	return "", errNotExpandable
}

// number reads a number by JSON's grammar and types it as Jackson's readTree
// does: int, long, BigInteger, or double.
func (s *treeScanner) number() (*node, error) {
	start := s.i
	p := s.p
	digits := func() int {
		n := 0
		for s.i < len(p) && p[s.i] >= '0' && p[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if p[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(p) && p[s.i] == '0':
		s.i++
	case digits() == 0:
		return nil, errNotExpandable
	}
	integer := true
	if s.i < len(p) && p[s.i] == '.' {
		s.i++
		integer = false
		if digits() == 0 {
			return nil, errNotExpandable
		}
	}
	if s.i < len(p) && (p[s.i] == 'e' || p[s.i] == 'E') {
		s.i++
		integer = false
		if s.i < len(p) && (p[s.i] == '+' || p[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return nil, errNotExpandable
		}
	}
	return numberNode(string(p[start:s.i]), integer)
}

// numberNode is a JSON number as Jackson reads it: an integer as an int, a long,
// then a BigInteger (kept as text, a double's schema); anything else a double,
// which must be finite.
func numberNode(text string, integer bool) (*node, error) {
	if integer {
		i, err := strconv.ParseInt(text, 10, 64)
		switch {
		case err != nil:
			return &node{kind: kFloat64, big: true, text: text}, nil
		case i >= math.MinInt32 && i <= math.MaxInt32:
			return &node{kind: kInt32, text: text}, nil
		default:
			return &node{kind: kInt64, text: text}, nil
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, errNotExpandable
	}
	return &node{kind: kFloat64, f: f}, nil
}
