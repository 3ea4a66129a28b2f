package redact

import (
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Error returns err with every value (a setting's URL, say) redacted wherever it
// appears in its message, as Text does; errors.Is and errors.As still see err. It
// returns nil for nil.
func Error(err error, values ...string) error {
	if err == nil {
		return nil
	}
	return &redactedError{msg: Text(err.Error(), values...), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// Text returns msg with each value redacted where it appears, whole, as one URL of a
// list, or quoted as Go quotes it; any other URL in msg redacted; a connection
// string a PostgreSQL driver's parse error quotes between backquotes (partly masked
// by the driver, which cannot always tell where a password ends) redacted again;
// and every word of a value that its redaction hides (a password, a token, a piece
// of a string that did not parse) masked wherever it still appears.
func Text(msg string, values ...string) string {
	return NewRedactor(values...).Text(msg)
}

// A Redactor is Text for a fixed set of values, prepared once: for a process that
// redacts the same settings in every log line.
type Redactor struct {
	values []string
	forms  *strings.Replacer // each form of a value by its redaction
	hidden *strings.Replacer // each hidden word by Mask
}

// NewRedactor prepares Text for values.
func NewRedactor(values ...string) *Redactor {
	var forms []string
	for _, v := range values {
		if v == "" {
			continue
		}
		forms = append(forms, v)
		for _, p := range splitList(v) {
			p = strings.TrimSpace(p)
			if p != "" && p != "," {
				forms = append(forms, p, strings.Trim(strconv.Quote(p), `"`))
			}
		}
	}
	var hidden []string
	for _, v := range values {
		hidden = append(hidden, hiddenWords(v)...)
	}
	return &Redactor{values: slices.Clone(values), forms: replacer(forms, URL), hidden: replacer(hidden, func(string) string { return Mask })}
}

// replacer replaces each of olds by with(old), the longest first.
func replacer(olds []string, with func(string) string) *strings.Replacer {
	slices.SortFunc(olds, func(a, b string) int { return len(b) - len(a) })
	olds = slices.Compact(olds)
	pairs := make([]string, 0, 2*len(olds))
	for _, o := range olds {
		pairs = append(pairs, o, with(o))
	}
	return strings.NewReplacer(pairs...)
}

// Text is the package's Text for r's values.
func (r *Redactor) Text(msg string) string {
	msg = r.forms.Replace(msg)
	if strings.Contains(msg, "cannot parse `") {
		msg = driverQuote.ReplaceAllStringFunc(msg, func(m string) string {
			inner := strings.TrimSuffix(strings.TrimPrefix(m, "cannot parse `"), "`")
			return "cannot parse `" + URL(inner) + "`"
		})
	}
	if strings.Contains(msg, "://") {
		msg = urlInText.ReplaceAllStringFunc(msg, URL)
	}
	return r.hidden.Replace(msg)
}

var (
	// driverQuote is the connection string in pgconn's "cannot parse `...`: ..." error.
	driverQuote = regexp.MustCompile("cannot parse `[^`]*`")
	// urlInText is a URL inside a message: up to a blank, a quote or a bracket.
	urlInText = regexp.MustCompile("[A-Za-z][A-Za-z0-9+.-]*://[^\\s\"'`<>()\\[\\]]+")
	// wordSep cuts values into the words hiddenWords compares.
	wordSep = regexp.MustCompile(`[\s:/@?&=#,;'"\\]+`)
)

// minHidden is the shortest hidden word masked in messages: a shorter one would
// mask ordinary letters.
const minHidden = 3

// hiddenWords are the words of value that URL(value) no longer shows, and their
// percent-decoded forms.
func hiddenWords(value string) []string {
	shown := map[string]bool{}
	for _, w := range wordSep.Split(URL(value), -1) {
		shown[w] = true
	}
	var out []string
	for _, w := range wordSep.Split(value, -1) {
		if len(w) < minHidden || shown[w] {
			continue
		}
		out = append(out, w)
		if d, err := url.PathUnescape(w); err == nil && d != w && len(d) >= minHidden {
			out = append(out, d)
		}
	}
	return out
}
