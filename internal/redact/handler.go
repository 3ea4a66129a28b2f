package redact

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"
)

// Handler returns a slog.Handler that passes each record to h with the values that
// values returns (the URL settings a process loaded) redacted, as Text does, in its
// message and in every string and error attribute. A process that logs errors from
// drivers and brokers it does not control cannot vouch for each message; this
// makes its log not show what its settings hide.
func Handler(h slog.Handler, values func() []string) slog.Handler {
	return &handler{next: h, values: values, last: new(atomic.Pointer[Redactor])}
}

type handler struct {
	next   slog.Handler
	values func() []string
	last   *atomic.Pointer[Redactor] // prepared for the values last seen
}

// redactor is a Redactor for the values now, prepared again only when they changed.
func (h *handler) redactor() *Redactor {
	vals := h.values()
	if r := h.last.Load(); r != nil && slices.Equal(r.values, vals) {
		return r
	}
	r := NewRedactor(vals...)
	h.last.Store(r)
	return r
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	red := h.redactor()
	out := slog.NewRecord(r.Time, r.Level, red.Text(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a, red))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	r := h.redactor()
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = redactAttr(a, r)
	}
	return &handler{next: h.next.WithAttrs(red), values: h.values, last: h.last}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.next.WithGroup(name), values: h.values, last: h.last}
}

// redactAttr redacts a string, an error, a list of strings, or a group's members.
func redactAttr(a slog.Attr, r *Redactor) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, r.Text(v.String()))
	case slog.KindGroup:
		members := v.Group()
		red := make([]slog.Attr, len(members))
		for i, m := range members {
			red[i] = redactAttr(m, r)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(red...)}
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, r.Text(x.Error()))
		case []string:
			red := make([]string, len(x))
			for i, s := range x {
				red[i] = r.Text(s)
			}
			return slog.Any(a.Key, red)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
