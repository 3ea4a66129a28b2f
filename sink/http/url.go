package http

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/walrelay/walrelay/internal/redact"
	"github.com/walrelay/walrelay/outbox"
)

// The URL template. {aggregate_type} and {event_type} may appear in the path and
// the query, never in the scheme or host: an event cannot send a request
// elsewhere. A value is escaped for its place: url.PathEscape in the path (a / in
// it stays within its segment), url.QueryEscape in the query (where PathEscape
// would leave & and = and so let a value add parameters). A value that is "." or
// "..", which servers and proxies resolve as a path step, is refused as an event
// error instead.

const (
	placeAggregateType = "{aggregate_type}"
	placeEventType     = "{event_type}"
)

// urlTemplate is a parsed Config.URL.
type urlTemplate struct {
	base         string // scheme://host[:port]
	path, query  string // the template's path and query (without '?'), placeholders in them
	templated    bool   // path or query has a placeholder
	scheme, host string // host is host:port, with the scheme's port when none is given
}

func parseURLTemplate(raw string) (*urlTemplate, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || (scheme != "http" && scheme != "https") {
		return nil, fmt.Errorf("url %q: want http:// or https:// and a host", raw)
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	if strings.ContainsAny(authority, "{}") {
		return nil, fmt.Errorf("url %q: {aggregate_type} and {event_type} may be used in the path and the query, not in the host", raw)
	}
	if strings.Contains(authority, "@") {
		return nil, fmt.Errorf("url %q: credentials in the URL would be written in the configuration; send them with --http-headers "+
			"Authorization=env:VARIABLE or Authorization=file:PATH", redact.URL(raw))
	}
	if strings.Contains(tail, "#") {
		return nil, fmt.Errorf("url %q: a fragment is never sent; remove it", raw)
	}
	u, err := url.Parse(scheme + "://" + authority)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("url %q: want http:// or https:// and a host", raw)
	}
	t := &urlTemplate{base: scheme + "://" + authority, scheme: scheme, host: u.Host}
	if u.Port() == "" {
		t.host += map[string]string{"http": ":80", "https": ":443"}[scheme]
	}
	t.path, t.query, _ = strings.Cut(tail, "?")
	for _, part := range []string{t.path, t.query} {
		if strings.Contains(part, placeAggregateType) || strings.Contains(part, placeEventType) {
			t.templated = true
		}
		left := strings.ReplaceAll(strings.ReplaceAll(part, placeAggregateType, ""), placeEventType, "")
		if strings.ContainsAny(left, "{}") {
			return nil, fmt.Errorf("url %q: only {aggregate_type} and {event_type} are replaced", raw)
		}
	}
	if _, err := url.Parse(t.render(sampleEvent)); err != nil {
		return nil, fmt.Errorf("url %q: %w", raw, err)
	}
	return t, nil
}

// errDotSegment is a value that would be a path step.
var errDotSegment = errors.New("is a path step (. or ..) that servers resolve; the URL template cannot carry it in its path")

// check refuses e when a value would change the URL's path rather than fill it.
func (t *urlTemplate) check(e *outbox.Event) error {
	for _, v := range []struct{ place, value string }{{placeAggregateType, e.AggregateType}, {placeEventType, e.EventType}} {
		if (v.value == "." || v.value == "..") && strings.Contains(t.path, v.place) {
			return fmt.Errorf("%s %q %w", strings.Trim(v.place, "{}"), v.value, errDotSegment)
		}
	}
	return nil
}

// render is e's URL.
func (t *urlTemplate) render(e *outbox.Event) string {
	if !t.templated {
		if t.query == "" {
			return t.base + t.path
		}
		return t.base + t.path + "?" + t.query
	}
	var b strings.Builder
	b.WriteString(t.base)
	replace(&b, t.path, e, url.PathEscape)
	if t.query != "" {
		b.WriteByte('?')
		replace(&b, t.query, e, url.QueryEscape)
	}
	return b.String()
}

func replace(b *strings.Builder, s string, e *outbox.Event, escape func(string) string) {
	for {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			b.WriteString(s)
			return
		}
		b.WriteString(s[:i])
		switch {
		case strings.HasPrefix(s[i:], placeAggregateType):
			b.WriteString(escape(e.AggregateType))
			s = s[i+len(placeAggregateType):]
		case strings.HasPrefix(s[i:], placeEventType):
			b.WriteString(escape(e.EventType))
			s = s[i+len(placeEventType):]
		default:
			b.WriteByte('{')
			s = s[i+1:]
		}
	}
}

// sampleEvent is what the template is checked with.
var sampleEvent = &outbox.Event{AggregateType: "order", EventType: "order.created"}
