package nats

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/sink"
)

// Defaults of DefaultConfig; zero fields of a Config mean the same.
const (
	// DefaultSubjectTemplate mirrors the Kafka sink's Debezium-compatible topic name.
	DefaultSubjectTemplate = "outbox.event.{aggregate_type}"
	// DefaultStream is the JetStream stream the subjects belong to.
	DefaultStream = "OUTBOX"
	// DefaultDedupWindow is the duplicate window of a stream the sink creates.
	DefaultDedupWindow = 2 * time.Minute
	// DefaultMaxPending bounds async publishes waiting for their PubAck.
	DefaultMaxPending = 4096
)

// Config of the NATS JetStream sink. Start from DefaultConfig; zero fields other
// than URL and CreateStream take the defaults.
type Config struct {
	// URL is the server (or comma-separated servers), e.g. nats://127.0.0.1:4222.
	URL string
	// SubjectTemplate may use {aggregate_type} and {event_type}.
	SubjectTemplate string
	// Stream is the JetStream stream that must capture the rendered subjects.
	Stream string
	// CreateStream creates Stream when it is missing (file storage, no limits,
	// one replica, duplicate window DedupWindow), capturing the template's literal
	// prefix up to its last '.' followed by ">" ("outbox.event.>" for the default
	// template), or the template itself when it has no placeholder. An existing
	// stream is never changed.
	CreateStream bool
	// DedupWindow is the duplicate window of a stream the sink creates: a message
	// whose Nats-Msg-Id (the event id) the stream stored less than this long ago is
	// acknowledged but not stored again.
	DedupWindow time.Duration
	// MaxPending bounds async publishes waiting for their PubAck; more events wait
	// inside the sink (the relay's in-flight window bounds them), Publish never blocks.
	MaxPending int
	// Format is how an event becomes the message's data and headers (package
	// record): the value converter, envelope fields, tombstones and header values.
	// A tombstone is empty data with the header tombstone: true. NATS messages have
	// no key and JetStream stamps each message as it stores it, so the key
	// converter and the event timestamp are refused.
	Format record.Format
	// Opts are passed to nats.Connect after walrelay's own, so they win (TLS,
	// credentials, tuning).
	Opts []nats.Option
}

// DefaultConfig returns the defaults; set URL (or keep nats://127.0.0.1:4222).
func DefaultConfig() Config {
	return Config{
		URL:             nats.DefaultURL,
		SubjectTemplate: DefaultSubjectTemplate,
		Stream:          DefaultStream,
		CreateStream:    true,
		DedupWindow:     DefaultDedupWindow,
		MaxPending:      DefaultMaxPending,
	}
}

// withDefaults fills zero fields.
func (c Config) withDefaults() Config {
	if c.SubjectTemplate == "" {
		c.SubjectTemplate = DefaultSubjectTemplate
	}
	if c.Stream == "" {
		c.Stream = DefaultStream
	}
	if c.DedupWindow == 0 {
		c.DedupWindow = DefaultDedupWindow
	}
	if c.MaxPending == 0 {
		c.MaxPending = DefaultMaxPending
	}
	return c
}

// Validate checks the configuration without connecting; zero fields count as
// their defaults.
func (c *Config) Validate() error {
	d := c.withDefaults()
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if strings.TrimSpace(d.URL) == "" {
		add("nats url is required (for example nats://127.0.0.1:4222)")
	}
	if _, err := sink.ParseTemplate(d.SubjectTemplate); err != nil {
		add("subject %w", err)
	} else if d.CreateStream {
		if _, err := streamSubject(d.SubjectTemplate); err != nil {
			add("%w", err)
		}
	}
	if strings.ContainsAny(d.Stream, " \t\r\n.*>/\\") {
		add("stream %q: a stream name cannot contain whitespace, '.', '*', '>' or path separators", d.Stream)
	}
	if d.DedupWindow < 0 {
		add("dedup window must not be negative, got %s", d.DedupWindow)
	}
	if d.MaxPending < 0 {
		add("max pending must not be negative, got %d", d.MaxPending)
	}
	if d.Format.KeyConverter != record.String || d.Format.KeySchemas {
		add("key-converter and key-converter-schemas-enable: NATS messages have no key (the aggregate id is the aggregate_id header); leave them at their defaults")
	}
	if d.Format.EventTimestamp {
		add("record-timestamp created-at: JetStream stamps each message with the time it stores it; leave record-timestamp at publish")
	}
	if err := d.Format.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// streamSubject is the subject filter a created stream captures: the template's
// literal text up to its last '.' before the first placeholder, then ">"; or the
// template itself when it has no placeholder.
func streamSubject(template string) (string, error) {
	open := strings.IndexByte(template, '{')
	if open < 0 {
		if err := checkSubject(template); err != nil {
			return "", fmt.Errorf("subject template %q: %w", template, err)
		}
		return template, nil
	}
	dot := strings.LastIndexByte(template[:open], '.')
	if dot <= 0 {
		return "", fmt.Errorf("subject template %q has no literal prefix ending in '.' (such as \"outbox.event.\") "+
			"to derive the stream's subjects from; create the stream yourself and set CreateStream to false", template)
	}
	filter := template[:dot+1] + ">"
	if err := checkSubject(template[:dot]); err != nil {
		return "", fmt.Errorf("subject template %q: %w", template, err)
	}
	return filter, nil
}

// errInvalidSubject: the rendered subject cannot be published to.
var errInvalidSubject = errors.New("invalid subject")

// checkSubject accepts a literal subject: non-empty tokens separated by '.', no
// whitespace, no wildcards.
func checkSubject(subject string) error {
	if subject == "" {
		return fmt.Errorf("%w: empty", errInvalidSubject)
	}
	if strings.ContainsAny(subject, " \t\r\n") {
		return fmt.Errorf("%w: contains whitespace", errInvalidSubject)
	}
	for tok := range strings.SplitSeq(subject, ".") {
		switch tok {
		case "":
			return fmt.Errorf("%w: empty token", errInvalidSubject)
		case "*", ">":
			return fmt.Errorf("%w: wildcard token %q", errInvalidSubject, tok)
		}
	}
	return nil
}

// captures reports whether a stream subject filter made by streamSubject matches
// the literal subject.
func captures(filter, subject string) bool {
	if prefix, ok := strings.CutSuffix(filter, ">"); ok {
		return len(subject) > len(prefix) && strings.HasPrefix(subject, prefix)
	}
	return filter == subject
}
