package redis

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/walrelay/walrelay/internal/redact"
	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/sink"
)

// DefaultStreamTemplate mirrors the Kafka sink's topic default, so consumers keep their names.
const DefaultStreamTemplate = "outbox.event.{aggregate_type}"

// DedupKeyPrefix starts every deduplication key: DedupKeyPrefix + stream + ":" + event id.
const DedupKeyPrefix = "walrelay:dedup:"

// Config of the Redis Streams sink. Start from DefaultConfig.
type Config struct {
	// URL is a go-redis URL, redis://[user:password@]host:port/db or rediss:// for TLS.
	// Query parameters tune the client (dial_timeout, read_timeout, pool_size,
	// max_retries, ...; see go-redis ParseURL). A standalone server: keys of one batch
	// span several hash slots, so Redis Cluster is not supported.
	URL string
	// StreamTemplate names the stream; it may use {aggregate_type} and {event_type}.
	StreamTemplate string
	// MaxLen, when positive, trims each stream on write with XADD MAXLEN ~ MaxLen
	// (approximate: the stream holds at least MaxLen entries, a little more at times).
	// 0 keeps every entry.
	MaxLen int64
	// DedupWindow is how long an event id is remembered per stream, so a redelivery
	// within it adds nothing. Each remembered id is one small key. 0 disables dedup.
	DedupWindow time.Duration
	// BatchSize is the most events sent in one round trip (one script call).
	BatchSize int
	// Linger is the longest a batch waits to fill after its first event; 0 sends
	// whatever is queued at once.
	Linger time.Duration
	// Deprecated: MaxBufferedEvents is ignored. Publish used to block while this many
	// events awaited their outcome, which stopped the relay's stream; it never waits
	// now, and the events queued are bounded by the callers' windows.
	MaxBufferedEvents int
	// Format is how an event becomes the entry's fields (package record): the value
	// converter's value as payload, envelope fields, tombstones and header values.
	// A tombstone is an empty payload field and the field tombstone = true. An entry
	// has no key and Redis names it by the time it appends it, so the key converter
	// and the event timestamp are refused.
	Format record.Format
	// Logger receives warnings while Redis is unavailable; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the defaults: a local server, Debezium-style stream names,
// unbounded streams, a 24h dedup window, batches of 256 lingering at most 1ms.
func DefaultConfig() Config {
	return Config{
		URL:            "redis://127.0.0.1:6379/0",
		StreamTemplate: DefaultStreamTemplate,
		DedupWindow:    24 * time.Hour,
		BatchSize:      256,
		Linger:         time.Millisecond,
	}
}

// Validate checks the configuration without connecting.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.URL == "" {
		add("redis url is required, e.g. redis://127.0.0.1:6379/0")
	} else if _, err := goredis.ParseURL(c.URL); err != nil {
		errs = append(errs, redact.Error(fmt.Errorf("redis url: %w", err), c.URL))
	}
	if _, err := sink.ParseTemplate(c.StreamTemplate); err != nil {
		add("stream template: %w", err)
	}
	if c.MaxLen < 0 {
		add("max len must be 0 (unbounded) or positive, got %d", c.MaxLen)
	}
	if c.DedupWindow < 0 || (c.DedupWindow > 0 && c.DedupWindow < time.Millisecond) {
		add("dedup window must be 0 (disabled) or at least 1ms, got %s", c.DedupWindow)
	}
	if c.BatchSize <= 0 {
		add("batch size must be positive, got %d", c.BatchSize)
	}
	if c.Linger < 0 {
		add("linger must not be negative, got %s", c.Linger)
	}
	if c.Format.KeyConverter != record.String || c.Format.KeySchemas {
		add("key-converter and key-converter-schemas-enable: a Redis stream entry has no key (the aggregate id is the aggregate_id field); leave them at their defaults")
	}
	if c.Format.EventTimestamp {
		add("record-timestamp created-at: Redis names each entry by the time it appends it; leave record-timestamp at publish")
	}
	if err := c.Format.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
