package redact

import (
	"context"
	"log/slog"
)

// Handler returns a slog.Handler that passes each record to h with the values that
// values returns (the URL settings a process loaded) redacted, as Text does, in its
// message and in every string and error attribute. A process that logs errors from
// drivers and brokers it does not control cannot vouch for each message; this
// makes its log not show what its settings hide.
func Handler(h slog.Handler, values func() []string) slog.Handler {
	return &handler{next: h, values: values}
}

type handler struct {
	next   slog.Handler
	values func() []string
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	vals := h.values()
	out := slog.NewRecord(r.Time, r.Level, Text(r.Message, vals...), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a, vals))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	vals := h.values()
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = redactAttr(a, vals)
	}
	return &handler{next: h.next.WithAttrs(red), values: h.values}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.next.WithGroup(name), values: h.values}
}

// redactAttr redacts a string, an error, a list of strings, or a group's members.
func redactAttr(a slog.Attr, vals []string) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, Text(v.String(), vals...))
	case slog.KindGroup:
		members := v.Group()
		red := make([]slog.Attr, len(members))
		for i, m := range members {
			red[i] = redactAttr(m, vals)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(red...)}
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, Text(x.Error(), vals...))
		case []string:
			red := make([]string, len(x))
			for i, s := range x {
				red[i] = Text(s, vals...)
			}
			return slog.Any(a.Key, red)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
