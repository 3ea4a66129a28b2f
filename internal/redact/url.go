package redact

import (
	"net/url"
	"strings"
)

// Mask stands where a secret was.
const Mask = "xxxxx"

// URL returns value with its secrets masked: the password of a URL's user, a user
// given without a password (a token, as NATS takes it) except in a PostgreSQL URL,
// where the user name is kept, and every query parameter or keyword whose name
// contains pass, token, secret, key or auth, whatever its case. It takes a URL, a
// multi-host PostgreSQL URL, a comma-separated list of URLs, a PostgreSQL
// keyword/value string (host=... password=...) or a bare host:port. What it cannot
// read is masked whole from the point where reading failed.
func URL(value string) string {
	if value == "" {
		return ""
	}
	if schemeLen(value) == 0 {
		return bare(value)
	}
	parts := splitList(value)
	for i, p := range parts {
		parts[i] = oneURL(p)
	}
	return strings.Join(parts, "")
}

// URLs is URL of each value.
func URLs(values []string) []string {
	if values == nil {
		return nil
	}
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = URL(v)
	}
	return out
}

// sensitive reports whether a query parameter or keyword of this name holds a secret.
func sensitive(name string) bool {
	if n, err := url.QueryUnescape(name); err == nil {
		name = n
	}
	name = strings.ToLower(name)
	for _, s := range []string{"pass", "token", "secret", "key", "auth"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}

// schemeLen is the length of value's leading "scheme://", or 0 when it has none.
func schemeLen(value string) int {
	for i := 0; i < len(value); i++ {
		c := value[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && strings.HasPrefix(value[i:], "://"):
			return i + 3
		default:
			return 0
		}
	}
	return 0
}

// splitList cuts a comma-separated list of URLs before each comma that is followed
// (after blanks) by another scheme://, keeping the separators in the parts so that
// joining them gives value back. A multi-host PostgreSQL URL's commas are not
// followed by a scheme, so it stays whole.
func splitList(value string) []string {
	var parts []string
	start := 0
	for i := 0; i < len(value); i++ {
		if value[i] != ',' {
			continue
		}
		j := i + 1
		for j < len(value) && (value[j] == ' ' || value[j] == '\t') {
			j++
		}
		if schemeLen(value[j:]) > 0 {
			parts = append(parts, value[start:i], value[i:j])
			start = j
			i = j - 1
		}
	}
	return append(parts, value[start:])
}

// oneURL redacts one URL, or passes a list separator through.
func oneURL(u string) string {
	n := schemeLen(u)
	if n == 0 {
		return u // a separator of splitList's
	}
	scheme, rest := u[:n], u[n:]
	postgres := strings.EqualFold(scheme, "postgres://") || strings.EqualFold(scheme, "postgresql://")
	authEnd := strings.IndexAny(rest, "/?#")
	if authEnd < 0 {
		authEnd = len(rest)
	}
	authority, tail := rest[:authEnd], rest[authEnd:]
	at := strings.LastIndexByte(authority, '@')
	// An '@' after the authority is a password whose unencoded '/', '?' or '#'
	// cut the URL short: mask everything up to the last '@', drop the query.
	if last := strings.LastIndexByte(rest, '@'); last >= authEnd {
		host := rest[last+1:]
		if q := strings.IndexAny(host, "?#"); q >= 0 {
			host = host[:q] + "?" + Mask
		}
		return scheme + Mask + "@" + host
	}
	var b strings.Builder
	b.WriteString(scheme)
	if at >= 0 {
		user, _, hasPassword := strings.Cut(authority[:at], ":")
		switch {
		case strings.ContainsAny(user, "@"):
			b.WriteString(Mask) // several '@': no telling which part is the user
		case hasPassword:
			b.WriteString(user + ":" + Mask)
		case postgres:
			b.WriteString(user)
		default:
			b.WriteString(Mask) // a user without a password is a token
		}
		b.WriteString("@")
		authority = authority[at+1:]
	}
	b.WriteString(authority)
	b.WriteString(query(tail))
	return b.String()
}

// query masks the sensitive parameters of a URL's path, query and fragment part.
func query(tail string) string {
	q := strings.IndexByte(tail, '?')
	if q < 0 {
		if f := strings.IndexByte(tail, '#'); f >= 0 && strings.Contains(tail[f:], "=") {
			return tail[:f] + "#" + Mask // a fragment with a value in it may be a mislaid parameter
		}
		return tail
	}
	path, params := tail[:q+1], tail[q+1:]
	fragment := ""
	if f := strings.IndexByte(params, '#'); f >= 0 {
		params, fragment = params[:f], "#"+Mask
	}
	pairs := strings.Split(params, "&")
	for i, pair := range pairs {
		if name, _, ok := strings.Cut(pair, "="); ok && sensitive(name) {
			pairs[i] = name + "=" + Mask
		} else if !ok && sensitive(pair) {
			pairs[i] = Mask
		}
	}
	return path + strings.Join(pairs, "&") + fragment
}

// bare redacts a value without a scheme: a keyword/value string when it has an
// '=', else a host:port, whose part up to a last '@' is masked.
func bare(value string) string {
	if strings.Contains(value, "=") {
		return keywordValue(value)
	}
	if at := strings.LastIndexByte(value, '@'); at >= 0 {
		return Mask + value[at:]
	}
	return value
}

// keywordValue redacts a PostgreSQL keyword/value string, read as PostgreSQL reads
// it: keyword = value, the value bare or in single quotes, backslash escaping. The
// values of sensitive keywords are masked; from a place where the string stops
// making sense the rest is masked.
func keywordValue(s string) string {
	var out []string
	for i := 0; ; {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i == len(s) {
			break
		}
		start := i
		for i < len(s) && s[i] != '=' && !isSpace(s[i]) {
			i++
		}
		key := s[start:i]
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if key == "" || i == len(s) || s[i] != '=' {
			out = append(out, Mask)
			break
		}
		i++
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		vstart := i
		ok := true
		if i < len(s) && s[i] == '\'' {
			i++
			for ok = false; i < len(s); i++ {
				if s[i] == '\\' {
					i++
					continue
				}
				if s[i] == '\'' {
					i++
					ok = true
					break
				}
			}
		} else {
			for ; i < len(s) && !isSpace(s[i]); i++ {
				if s[i] == '\\' {
					i++
				}
			}
		}
		if i > len(s) {
			i, ok = len(s), false
		}
		switch {
		case !ok:
			out = append(out, key+"="+Mask)
			return strings.Join(out, " ")
		case sensitive(key):
			out = append(out, key+"="+Mask)
		default:
			out = append(out, key+"="+s[vstart:i])
		}
	}
	return strings.Join(out, " ")
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}
