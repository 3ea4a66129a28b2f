package pubsub

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"google.golang.org/api/option"

	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/sink"
)

// DefaultTopicTemplate mirrors the Kafka sink's topic default, so consumers keep their names.
const DefaultTopicTemplate = "outbox.event.{aggregate_type}"

// Config of the Google Pub/Sub sink. Start from DefaultConfig.
type Config struct {
	// Project is the Google Cloud project the topics belong to.
	Project string
	// TopicTemplate names the topic (its ID within Project); it may use
	// {aggregate_type} and {event_type}. Topics must exist: publishing does not create them.
	TopicTemplate string
	// Endpoint overrides the service endpoint (host:port), for a locational endpoint
	// such as us-east1-pubsub.googleapis.com:443. Empty: the client's default.
	Endpoint string
	// EmulatorHost is the host:port of a Pub/Sub emulator or fake, reached in
	// plaintext without credentials. Empty: Google's service.
	EmulatorHost string
	// CredentialsFile is a service account key (JSON). Empty: Application Default
	// Credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud's ADC file, the metadata
	// server on Google Cloud).
	CredentialsFile string
	// Publish are the client's batching settings. Message ordering is always on;
	// flow control is the relay's in-flight window, so the client's is ignored.
	Publish gpubsub.PublishSettings
	// Format is how an event becomes the message's data and attributes (package
	// record): the value converter, envelope fields, tombstones and header values.
	// A tombstone is empty data with the attribute tombstone = true; a header with a
	// null value is an empty attribute. The ordering key is the aggregate id and
	// Pub/Sub stamps each message as it stores it, so the key converter and the
	// event timestamp are refused.
	Format record.Format
	// Logger receives warnings while Pub/Sub is unavailable; nil means slog.Default().
	Logger *slog.Logger
	// Opts are passed to the client after walrelay's own, so they win.
	Opts []option.ClientOption
}

// DefaultPublishSettings are the client's batching for the relay. The delay is 1ms
// instead of the client's 10ms: BenchmarkDrain drained faster with it, since an
// ordering key's next batch forms while its request is out anyway and a longer
// delay only waits (docs/operations.md, "Google Pub/Sub").
func DefaultPublishSettings() gpubsub.PublishSettings {
	ps := gpubsub.DefaultPublishSettings
	ps.DelayThreshold = time.Millisecond
	ps.CountThreshold = 100
	ps.ByteThreshold = 1e6
	// A bundle that keeps failing retriable errors this long comes back to the sink,
	// which sends it again (in order) after a backoff and says so in the log.
	ps.Timeout = 10 * time.Second
	return ps
}

// DefaultConfig returns the defaults; set Project.
func DefaultConfig() Config {
	return Config{TopicTemplate: DefaultTopicTemplate, Publish: DefaultPublishSettings()}
}

// Validate checks the configuration without connecting.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Project == "" {
		add("project is required (--pubsub-project or WALRELAY_PUBSUB_PROJECT): the Google Cloud project of the topics")
	}
	if tmpl, err := sink.ParseTemplate(c.TopicTemplate); err != nil {
		add("topic template: %w", err)
	} else if sample := tmpl.Render(sampleEvent); checkTopic(sample) != nil {
		add("topic template %q renders %q for aggregate type %q: %w", c.TopicTemplate, sample, sampleEvent.AggregateType, checkTopic(sample))
	}
	for _, a := range []struct{ what, addr string }{{"endpoint", c.Endpoint}, {"emulator host", c.EmulatorHost}} {
		if _, port, err := net.SplitHostPort(a.addr); a.addr != "" && (err != nil || port == "") {
			add("%s %q is not host:port", a.what, a.addr)
		}
	}
	if c.EmulatorHost != "" && (c.Endpoint != "" || c.CredentialsFile != "") {
		add("emulator host %s takes neither an endpoint nor a credentials file; unset them, or unset the emulator host to reach Google's service", c.EmulatorHost)
	}
	if c.CredentialsFile != "" {
		if f, err := os.Open(c.CredentialsFile); err != nil {
			add("credentials file: %w", err)
		} else {
			f.Close()
		}
	}
	p := c.Publish
	if p.CountThreshold < 1 || p.CountThreshold > gpubsub.MaxPublishRequestCount {
		add("batch count must be 1 to %d, got %d", gpubsub.MaxPublishRequestCount, p.CountThreshold)
	}
	if p.ByteThreshold < 1 || p.ByteThreshold > gpubsub.MaxPublishRequestBytes {
		add("batch bytes must be 1 to %d, got %d", int(gpubsub.MaxPublishRequestBytes), p.ByteThreshold)
	}
	if p.DelayThreshold < 0 {
		add("batch delay must not be negative, got %s", p.DelayThreshold)
	}
	if p.Timeout < time.Second {
		add("publish timeout must be at least 1s, got %s", p.Timeout)
	}
	if p.HedgingSettings != nil {
		add("publish hedging cannot be used with ordering keys; leave HedgingSettings nil")
	}
	if c.Format.KeyConverter != record.String || c.Format.KeySchemas {
		add("key-converter and key-converter-schemas-enable: a Pub/Sub message has no key (its ordering key is the aggregate id " +
			"as it is, and the aggregate_id attribute); leave them at their defaults")
	}
	if c.Format.EventTimestamp {
		add("record-timestamp created-at: Pub/Sub stamps each message with the time it stores it (publishTime); leave record-timestamp at publish")
	}
	if err := c.Format.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
