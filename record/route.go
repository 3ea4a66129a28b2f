package record

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Route names a topic from the routed value (the aggregate type column) with a
// regular expression and a replacement, as Debezium's outbox router does with
// route.topic.regex and route.topic.replacement (it hands the value to Kafka's
// RegexRouter): when the expression matches the whole value, the topic is the
// replacement with the groups filled in; otherwise the topic is the value itself.
//
// The expression is Go's RE2, which reads Java's syntax for everything but
// lookarounds, backreferences, possessive quantifiers, atomic groups and class
// intersections; those are refused when the route is parsed, never silently read as
// something else (other syntax RE2 lacks fails to compile). One difference remains:
// Java's dot does not match \r, U+0085, U+2028 or U+2029, RE2's does.
type Route struct {
	whole *regexp.Regexp // the expression anchored: Java's Matcher.matches
	first *regexp.Regexp // as it is: Matcher.replaceFirst's find
	repl  string         // in regexp.Expand's syntax
}

// ParseRoute checks regex and a replacement in Java's syntax ($1, ${name}, \$ for a
// literal dollar) and returns the route.
func ParseRoute(regex, replacement string) (*Route, error) {
	if s, ok := JavaOnly(regex); ok {
		return nil, fmt.Errorf("topic-regex %q uses %s, which Java reads but Go's RE2 does not; "+
			"write it without lookarounds, backreferences, possessive quantifiers, atomic groups or class intersections", regex, s)
	}
	first, err := regexp.Compile(regex)
	if err != nil {
		return nil, fmt.Errorf("topic-regex %q: %w", regex, err)
	}
	whole, err := regexp.Compile(`^(?:` + regex + `)$`)
	if err != nil {
		return nil, fmt.Errorf("topic-regex %q: %w", regex, err)
	}
	repl, err := expandTemplate(replacement, first)
	if err != nil {
		return nil, fmt.Errorf("topic-replacement %q: %w", replacement, err)
	}
	return &Route{whole: whole, first: first, repl: repl}, nil
}

// Topic is the topic for the routed value v. Kafka's RegexRouter replaces the first
// match when the whole value matches; the first match is usually the whole value,
// but not always (a|ab on ab matches a first).
func (r *Route) Topic(v string) string {
	if !r.whole.MatchString(v) {
		return v
	}
	m := r.first.FindStringSubmatchIndex(v)
	b := make([]byte, 0, len(v)+len(r.repl))
	b = append(b, v[:m[0]]...)
	b = r.first.ExpandString(b, r.repl, v, m)
	return string(append(b, v[m[1]:]...))
}

// JavaOnly finds a construct of Java's regular expressions that RE2 lacks; Go's
// own error for them ("invalid or unsupported Perl syntax") would not say what to
// change.
func JavaOnly(re string) (string, bool) {
	for _, c := range []struct{ token, name string }{
		{"(?=", "a lookahead (?=…)"}, {"(?!", "a negative lookahead (?!…)"},
		{"(?<=", "a lookbehind (?<=…)"}, {"(?<!", "a negative lookbehind (?<!…)"},
		{"(?>", "an atomic group (?>…)"}, {"*+", "a possessive quantifier *+"},
		{"++", "a possessive quantifier ++"}, {"?+", "a possessive quantifier ?+"},
		{`\k<`, `a named backreference \k<…>`},
		{"&&", "a character class intersection &&, which RE2 reads as two ampersands"},
	} {
		if i := strings.Index(re, c.token); i >= 0 && !escaped(re, i) {
			return c.name, true
		}
	}
	for i := 0; i+1 < len(re); i++ {
		if re[i] == '\\' {
			if re[i+1] >= '1' && re[i+1] <= '9' {
				return `a backreference \` + re[i+1:i+2], true
			}
			i++ // an escaped character
		}
	}
	return "", false
}

// escaped reports whether re[i] follows an odd run of backslashes.
func escaped(re string, i int) bool {
	n := 0
	for i > 0 && re[i-1] == '\\' {
		n++
		i--
	}
	return n%2 == 1
}

// expandTemplate turns a replacement in Java's syntax (Matcher.appendReplacement:
// $n takes as many digits as still name a group, ${name} a named group, a
// backslash makes the next character literal) into regexp.Expand's.
func expandTemplate(s string, re *regexp.Regexp) (string, error) {
	var b strings.Builder
	groups := re.NumSubexp() // the outer (?:…) adds none; $0 is the whole match
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			if i+1 == len(s) {
				return "", fmt.Errorf("ends in a backslash; write \\\\ for one")
			}
			i++
			switch s[i] {
			case '$':
				b.WriteString("$$")
			case '{', '}':
				return "", fmt.Errorf("has braces; topic names have none")
			default:
				b.WriteByte(s[i])
			}
		case '$':
			if i+1 == len(s) {
				return "", fmt.Errorf("ends in $; write \\$ for a dollar")
			}
			if s[i+1] == '{' {
				end := strings.IndexByte(s[i:], '}')
				if end < 0 {
					return "", fmt.Errorf("${ is not closed")
				}
				name := s[i+2 : i+end]
				if re.SubexpIndex(name) < 0 {
					return "", fmt.Errorf("no group named %q in topic-regex", name)
				}
				b.WriteString("${" + name + "}")
				i += end
				continue
			}
			if s[i+1] < '0' || s[i+1] > '9' {
				return "", fmt.Errorf("$ must be followed by a group number or {name}; write \\$ for a dollar")
			}
			n := int(s[i+1] - '0')
			if n > groups {
				return "", fmt.Errorf("no group %d in topic-regex", n)
			}
			i++
			for i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9' && n*10+int(s[i+1]-'0') <= groups {
				n = n*10 + int(s[i+1]-'0')
				i++
			}
			b.WriteString("${" + strconv.Itoa(n) + "}")
		case '{', '}':
			// The topic is carried as a topic template (outbox.Event.TopicTemplate),
			// where braces are placeholders; no Kafka topic has them.
			return "", fmt.Errorf("has braces outside ${name}; topic names have none")
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}
