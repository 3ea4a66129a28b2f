package sqs

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/walrelay/walrelay/internal/redact"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/sink"
)

// Defaults of DefaultConfig.
const (
	// DefaultQueueTemplate names a FIFO queue per aggregate type, so that order per
	// aggregate holds. SQS queue names allow letters, digits, '-' and '_' only (no
	// '.', unlike the Kafka sink's topic names), and a FIFO queue's ends in .fifo.
	DefaultQueueTemplate = "outbox-{aggregate_type}.fifo"
	// DefaultMaxInFlightRequests bounds SendMessageBatch requests under way at once.
	DefaultMaxInFlightRequests = 16
	// DefaultLinger is how long a batch that is not full may wait for more entries.
	DefaultLinger = 5 * time.Millisecond
	// DefaultMaxRequestBytes bounds a request's messages: 256 KiB, what every
	// SQS-compatible server takes (AWS takes 1 MiB since 2025). A message larger than
	// this, up to the queue's MaximumMessageSize, goes in a request of its own.
	DefaultMaxRequestBytes = 256 << 10
)

// Config of the Amazon SQS sink. Start from DefaultConfig.
type Config struct {
	// QueueTemplate names the queue; {aggregate_type} and {event_type} are replaced.
	// A name ending in .fifo is a FIFO queue. Queues are not created: create them
	// with the attributes you want (retention, encryption, a dead-letter queue).
	QueueTemplate string
	// Region is the AWS region; empty: the standard chain's (AWS_REGION, the shared
	// config file's profile).
	Region string
	// Endpoint overrides the SQS endpoint, e.g. http://127.0.0.1:9324 for a local
	// server or a VPC endpoint's URL; empty: the region's.
	Endpoint string
	// Credentials, when set, replace the standard AWS credential chain
	// (environment, shared files, web identity, container and instance roles).
	Credentials aws.CredentialsProvider
	// MaxInFlightRequests bounds SendMessageBatch requests under way at once.
	MaxInFlightRequests int
	// Linger is how long a request that is not full waits for more entries.
	Linger time.Duration
	// MaxRequestBytes bounds the messages of one request (see DefaultMaxRequestBytes).
	MaxRequestBytes int
	// Format is how an event becomes the message's body and attributes (package
	// record): the value converter, envelope fields, tombstones and header values.
	// A tombstone is the body "null" with the attribute tombstone = true; a header
	// with an empty or null value has no attribute (SQS refuses an empty one). A
	// message has no key and SQS stamps it as it receives it, so the key converter
	// and the event timestamp are refused.
	Format record.Format
	// Logger receives warnings while SQS is unavailable; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the defaults: FIFO queues per aggregate type, the standard
// credential chain and region, 16 requests in flight, 5ms linger.
func DefaultConfig() Config {
	return Config{
		QueueTemplate:       DefaultQueueTemplate,
		MaxInFlightRequests: DefaultMaxInFlightRequests,
		Linger:              DefaultLinger,
		MaxRequestBytes:     DefaultMaxRequestBytes,
	}
}

// Validate checks the configuration without connecting.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := CheckQueueTemplate(c.QueueTemplate); err != nil {
		add("%w", err)
	}
	if c.Endpoint != "" {
		if u, err := url.Parse(c.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("sqs endpoint %q: want a URL such as https://sqs.eu-west-1.amazonaws.com or http://127.0.0.1:9324", redact.URL(c.Endpoint))
		}
	}
	if c.MaxInFlightRequests <= 0 {
		add("max in-flight requests must be positive, got %d", c.MaxInFlightRequests)
	}
	if c.Linger < 0 {
		add("linger must not be negative, got %s", c.Linger)
	}
	if c.MaxRequestBytes < 1024 {
		add("max request bytes must be at least 1024, got %d", c.MaxRequestBytes)
	}
	if c.Format.KeyConverter != record.String || c.Format.KeySchemas {
		add("key-converter and key-converter-schemas-enable: an SQS message has no key (the aggregate id is the aggregate_id attribute " +
			"and a FIFO queue's message group); leave them at their defaults")
	}
	if c.Format.EventTimestamp {
		add("record-timestamp created-at: SQS stamps each message with the time it receives it (SentTimestamp); leave record-timestamp at publish")
	}
	if err := c.Format.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// CheckQueueTemplate checks that a queue template parses and that its literal text
// makes valid queue names (a placeholder's value is checked per event).
func CheckQueueTemplate(s string) error {
	t, err := sink.ParseTemplate(s)
	if err != nil {
		return fmt.Errorf("queue %w", err)
	}
	sample := t.Render(&outbox.Event{AggregateType: "x", EventType: "x"})
	if err := checkQueueName(sample); err != nil {
		return fmt.Errorf("queue template %q: %w; for example --topic-template 'outbox-{aggregate_type}.fifo'", s, err)
	}
	return nil
}

// errQueueName: a rendered name SQS would refuse.
var errQueueName = errors.New("invalid queue name")

// checkQueueName applies SQS's rule: 1 to 80 letters, digits, '-' and '_', the
// .fifo suffix of a FIFO queue included.
func checkQueueName(name string) error {
	base := strings.TrimSuffix(name, fifoSuffix)
	switch {
	case base == "":
		return fmt.Errorf("%w %q: empty", errQueueName, name)
	case len(name) > 80:
		return fmt.Errorf("%w %q: longer than 80 characters", errQueueName, name)
	}
	for i := 0; i < len(base); i++ {
		if c := base[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("%w %q: SQS queue names allow letters, digits, '-' and '_' only (and a .fifo suffix), not %q",
				errQueueName, name, rune(c))
		}
	}
	return nil
}

const fifoSuffix = ".fifo"

// CheckRecordColumns checks, before streaming, that the headers an outbox table can
// give its events under f fit SQS's 10 message attributes with the sink's own: the
// record's own headers (five with walrelay's, the id alone with Debezium's),
// tombstone, traceparent and tracestate when the table has a trace column, then the
// header columns.
func CheckRecordColumns(f record.Format, cols outbox.Columns) error {
	var created [record.CreatedLen]byte
	own, nOwn := f.Own(&outbox.Event{EventType: "x"}, &created)
	names := make([]string, nOwn)
	for i, h := range own[:nOwn] {
		names[i] = h.Key
	}
	n := nOwn + 1 + len(cols.Headers)
	trace := ""
	if cols.Trace != "" {
		n += 2
		trace = fmt.Sprintf(", traceparent and tracestate (column-trace %s; set it empty if the table has no trace column)", cols.Trace)
	}
	if n <= maxAttributes {
		return nil
	}
	return fmt.Errorf("sqs allows %d message attributes per message and the headers of these columns can need %d: "+
		"walrelay's own %s, tombstone%s, and %d from column-headers; place at most %d columns as headers",
		maxAttributes, n, strings.Join(names, ", "), trace, len(cols.Headers), len(cols.Headers)-(n-maxAttributes))
}
