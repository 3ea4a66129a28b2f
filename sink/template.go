package sink

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/walrelay/walrelay/outbox"
)

// Template renders a destination name (topic, subject, stream, routing key) from an
// event's {aggregate_type} and {event_type}.
type Template struct {
	parts []string // literal text and placeholders, alternating, starting with text
}

// ParseTemplate checks a template; any other placeholder is an error.
func ParseTemplate(s string) (Template, error) {
	if s == "" {
		return Template{}, errors.New("template is empty")
	}
	var t Template
	rest := s
	for {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			if strings.IndexByte(rest, '}') >= 0 {
				return Template{}, fmt.Errorf("template %q: unmatched '}'", s)
			}
			t.parts = append(t.parts, rest)
			return t, nil
		}
		closing := strings.IndexByte(rest[open:], '}')
		if closing < 0 {
			return Template{}, fmt.Errorf("template %q: unclosed '{'", s)
		}
		name := rest[open+1 : open+closing]
		if name != "aggregate_type" && name != "event_type" {
			return Template{}, fmt.Errorf("template %q: unknown placeholder {%s} (use {aggregate_type} or {event_type})", s, name)
		}
		t.parts = append(t.parts, rest[:open], name)
		rest = rest[open+closing+1:]
	}
}

// Render returns the topic for e.
func (t Template) Render(e *outbox.Event) string {
	if len(t.parts) == 1 {
		return t.parts[0]
	}
	var b strings.Builder
	for i, p := range t.parts {
		switch {
		case i%2 == 0:
			b.WriteString(p)
		case p == "aggregate_type":
			b.WriteString(e.AggregateType)
		default:
			b.WriteString(e.EventType)
		}
	}
	return b.String()
}

// Templates resolves an event's own topic template (outbox.Event.TopicTemplate),
// parsed once per distinct template; the zero value is ready to use.
type Templates struct {
	mu sync.Mutex
	m  map[string]Template
}

// For returns the template e names, or def when it names none. A template that does
// not parse (the relay checks them at start) falls back to def too.
func (c *Templates) For(def Template, e *outbox.Event) Template {
	if e.TopicTemplate == "" {
		return def
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.m[e.TopicTemplate]; ok {
		return t
	}
	t, err := ParseTemplate(e.TopicTemplate)
	if err != nil {
		t = def
	}
	if c.m == nil {
		c.m = make(map[string]Template)
	}
	c.m[strings.Clone(e.TopicTemplate)] = t
	return t
}

// Render renders the template e names, or def.
func (c *Templates) Render(def Template, e *outbox.Event) string { return c.For(def, e).Render(e) }
