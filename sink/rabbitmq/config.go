package rabbitmq

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/walrelay/walrelay/internal/redact"
	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/sink"
)

// Defaults of DefaultConfig; New also uses them for fields left at zero.
const (
	DefaultExchangeTemplate   = "outbox"
	DefaultRoutingKeyTemplate = "{aggregate_type}.{event_type}"
	DefaultMaxPending         = 4096
	DefaultReconnectMin       = 200 * time.Millisecond
	DefaultReconnectMax       = 10 * time.Second
)

// Config of the RabbitMQ sink. Start from DefaultConfig: Mandatory is true there,
// and false in a zero Config.
type Config struct {
	// URL is an AMQP URI, amqp://guest:guest@127.0.0.1:5672/ (amqps:// for TLS).
	// Its query may set heartbeat and connection_timeout.
	URL string
	// ExchangeTemplate names the exchange; it may use {aggregate_type} and
	// {event_type}. Empty: "outbox".
	ExchangeTemplate string
	// RoutingKeyTemplate renders the routing key. Empty: "{aggregate_type}.{event_type}".
	RoutingKeyTemplate string
	// DeclareExchange declares each exchange as a durable topic exchange the first
	// time it is used on a connection. Otherwise the sink checks that it exists
	// (a passive declare), and events for a missing exchange fail on their own.
	DeclareExchange bool
	// Mandatory publishes with mandatory=true: a message no queue is bound for is
	// returned by the broker and its event fails (*sink.EventError) instead of being
	// dropped silently.
	Mandatory bool
	// MaxPending bounds the publishes on the wire that wait for the broker's
	// confirm. Events beyond it wait in the sink, in order. While the broker is
	// unreachable it also bounds the events the sink holds: beyond it, Publish
	// fails at once with a broker-level error. 0: 4096.
	MaxPending int
	// ReconnectMin and ReconnectMax bound the backoff between connection attempts
	// (with jitter). 0: 200ms and 10s.
	ReconnectMin time.Duration
	ReconnectMax time.Duration
	// Format is how an event becomes the message's body and headers (package
	// record): the value converter, envelope fields, tombstones and header values.
	// A tombstone is an empty body with the header tombstone = true; a header with
	// a null value is AMQP's void. The timestamp property is created_at whatever
	// Format.EventTimestamp says (AMQP's is the message's own time, in seconds). A
	// message has no key, so the key converter is refused.
	Format record.Format
	// Logger receives connection loss and recovery; nil: slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the defaults: exchange "outbox", routing key
// "{aggregate_type}.{event_type}", mandatory publishes, 4096 pending confirms.
func DefaultConfig() Config {
	return Config{
		URL:                "amqp://guest:guest@127.0.0.1:5672/",
		ExchangeTemplate:   DefaultExchangeTemplate,
		RoutingKeyTemplate: DefaultRoutingKeyTemplate,
		Mandatory:          true,
		MaxPending:         DefaultMaxPending,
		ReconnectMin:       DefaultReconnectMin,
		ReconnectMax:       DefaultReconnectMax,
	}
}

// withDefaults fills the fields left at zero.
func (c Config) withDefaults() Config {
	if c.ExchangeTemplate == "" {
		c.ExchangeTemplate = DefaultExchangeTemplate
	}
	if c.RoutingKeyTemplate == "" {
		c.RoutingKeyTemplate = DefaultRoutingKeyTemplate
	}
	if c.MaxPending == 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.ReconnectMin == 0 {
		c.ReconnectMin = DefaultReconnectMin
	}
	if c.ReconnectMax == 0 {
		c.ReconnectMax = max(DefaultReconnectMax, c.ReconnectMin)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate checks the configuration without connecting. Fields left at zero take
// their defaults and are valid.
func (c *Config) Validate() error {
	d := c.withDefaults()
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.URL == "" {
		add("rabbitmq url is required, e.g. amqp://user:password@host:5672/vhost")
	} else if _, err := amqp.ParseURI(c.URL); err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = fmt.Errorf("%w (percent-encode reserved characters in the user name and password)", err)
		}
		errs = append(errs, redact.Error(fmt.Errorf("rabbitmq url %s: %w", c.URL, err), c.URL))
	}
	if _, err := sink.ParseTemplate(d.ExchangeTemplate); err != nil {
		add("exchange %w", err)
	}
	if _, err := sink.ParseTemplate(d.RoutingKeyTemplate); err != nil {
		add("routing key %w", err)
	}
	if c.MaxPending < 0 {
		add("max pending must not be negative, got %d", c.MaxPending)
	}
	if c.ReconnectMin < 0 || c.ReconnectMax < 0 {
		add("reconnect backoff must not be negative")
	}
	if d.ReconnectMax < d.ReconnectMin {
		add("reconnect max (%s) must not be shorter than reconnect min (%s)", d.ReconnectMax, d.ReconnectMin)
	}
	if c.Format.KeyConverter != record.String || c.Format.KeySchemas {
		add("key-converter and key-converter-schemas-enable: an AMQP message has no key (the aggregate id is the aggregate_id header, " +
			"the routing key comes from the routing key template); leave them at their defaults")
	}
	if err := c.Format.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
