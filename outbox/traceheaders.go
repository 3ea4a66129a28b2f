package outbox

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// The W3C Trace Context headers a trace column becomes.
const (
	TraceParentHeader = "traceparent"
	TraceStateHeader  = "tracestate"
)

// ParseTraceColumn reads a trace column's content: a bare W3C traceparent value, or
// Debezium's serialized span context, java.util.Properties text whose lines are
// key=value (or key: value) and # or ! comments, with the keys traceparent and
// tracestate. It returns the traceparent and tracestate values, tracestate "" when
// absent; ok is false when there is no valid traceparent, and the event then carries
// no trace headers. Values share content's memory when no escape had to be undone.
func ParseTraceColumn(content string) (traceparent, tracestate string, ok bool) {
	content = strings.TrimSpace(content)
	if ValidTraceParent(content) {
		return content, "", true
	}
	for len(content) > 0 {
		var line string
		line, content, _ = cutLine(content)
		line = strings.TrimLeft(line, " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i < 0 {
			continue
		}
		key, value := strings.TrimSpace(line[:i]), strings.TrimSpace(line[i+1:])
		switch key {
		case TraceParentHeader:
			traceparent = unescapeProperty(value)
		case TraceStateHeader:
			tracestate = unescapeProperty(value)
		}
	}
	if !ValidTraceParent(traceparent) {
		return "", "", false
	}
	if !validTraceState(tracestate) {
		tracestate = "" // a broken tracestate is dropped, as W3C Trace Context asks
	}
	return traceparent, tracestate, true
}

func cutLine(s string) (line, rest string, found bool) {
	i := strings.IndexAny(s, "\r\n")
	if i < 0 {
		return s, "", false
	}
	line, rest = s[:i], s[i+1:]
	if s[i] == '\r' && strings.HasPrefix(rest, "\n") {
		rest = rest[1:]
	}
	return line, rest, true
}

// unescapeProperty undoes java.util.Properties escapes: \t \n \r \f, \uXXXX, and a
// backslash before any other character (Properties.store writes \= and \: in
// values).
func unescapeProperty(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '\\' || i+1 == len(v) {
			b.WriteByte(c)
			continue
		}
		i++
		switch v[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+4 < len(v) {
				if r, err := strconv.ParseUint(v[i+1:i+5], 16, 16); err == nil {
					b.WriteRune(rune(r))
					i += 4
					continue
				}
			}
			b.WriteByte('u')
		default:
			b.WriteByte(v[i])
		}
	}
	return b.String()
}

// ValidTraceParent reports whether v is a W3C traceparent: version-traceid-parentid-
// flags in lowercase hex (2, 32, 16 and 2 digits), version not ff, neither id all
// zeros; version 00 has nothing after the flags, a later version may have more
// after a '-'.
func ValidTraceParent(v string) bool {
	if len(v) < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return false
	}
	version, traceID, parentID, flags := v[0:2], v[3:35], v[36:52], v[53:55]
	if !lowerHex(version) || !lowerHex(traceID) || !lowerHex(parentID) || !lowerHex(flags) || version == "ff" {
		return false
	}
	if allZero(traceID) || allZero(parentID) {
		return false
	}
	if version == "00" {
		return len(v) == 55
	}
	return len(v) == 55 || v[55] == '-'
}

// validTraceState checks what a header can carry: printable ASCII, at most the 512
// characters W3C Trace Context asks a vendor to propagate.
func validTraceState(v string) bool {
	if len(v) > 512 || !utf8.ValidString(v) {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool { return strings.Trim(s, "0") == "" }

// AppendTraceHeaders appends the traceparent and tracestate headers a trace
// column's content carries (none when it holds no valid traceparent).
func AppendTraceHeaders(hs []Header, content string) []Header {
	parent, state, ok := ParseTraceColumn(content)
	if !ok {
		return hs
	}
	hs = append(hs, Header{Key: TraceParentHeader, Value: parent})
	if state != "" {
		hs = append(hs, Header{Key: TraceStateHeader, Value: state})
	}
	return hs
}

// TraceColumnContent is what a trace column holds for a traceparent and a tracestate:
// the bare traceparent, or properties text when there is a tracestate (the two forms
// ParseTraceColumn reads). It is empty without a traceparent.
func TraceColumnContent(parent, state string) string {
	switch {
	case parent == "":
		return ""
	case state != "":
		return TraceParentHeader + "=" + parent + "\n" + TraceStateHeader + "=" + state
	}
	return parent
}
