package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/dbconn"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/sink"
)

// Config configures a Relay. Start from DefaultConfig and set DatabaseURL and Sink.
type Config struct {
	// DatabaseURL is a PostgreSQL URL or keyword/value string. The role needs the
	// REPLICATION attribute, and the database wal_level = logical.
	DatabaseURL string
	// PrimaryURL is the primary's URL when DatabaseURL is a hot standby (PostgreSQL
	// 16+): the slot is created and streamed on the standby, and every write and
	// every read of walrelay's bookkeeping go to the primary (docs/postgresql.md,
	// "Decoding on a standby"). Empty: DatabaseURL does everything.
	PrimaryURL string
	// DatabasePassword, when set, is called before each new connection the relay
	// opens (the pool's, the leader session's, the replication connection, status's)
	// and its result is that connection's password, in place of the URL's: for
	// credentials that expire, such as AWS RDS IAM tokens. Its result is never
	// logged; its error is, so it must not carry the secret either.
	DatabasePassword func(ctx context.Context) (string, error)
	// Sink is the broker client: one of sink/kafka, sink/nats, sink/rabbitmq or
	// sink/redis (package sinks builds them from one configuration), or a sink.Sink of
	// the application's own. The relay does not close it. Exactly-once delivery
	// needs a sink.Transactional (Kafka).
	Sink sink.Sink
	// Format and SchemaRegistry are for the registry converters (record.Avro,
	// record.JSONSchema, record.Protobuf): Format is the sink's, whose Schemas
	// cache it shares, and SchemaRegistry what fills that cache. The relay
	// resolves each event's schema ids before handing it to the sink, holding the
	// stream while the registry does not answer (schemahold.go). Nil: no
	// converter uses a registry.
	Format         *record.Format
	SchemaRegistry record.Registry
	// Table is the outbox table, optionally schema-qualified.
	Table string
	// Columns names the table's columns (default: the article's names).
	Columns outbox.Columns
	// TopicRegex and TopicReplacement route Table's events by a regular expression
	// on the aggregate type (TableConfig.TopicRegex).
	TopicRegex, TopicReplacement string
	// Tables, when set, are the outbox tables the relay streams through its one slot
	// and publication, each with its own columns and topic template; Table and
	// Columns are then ignored. Order and every guarantee hold per table.
	Tables []TableConfig
	// Slot is the logical replication slot's name; one relay streams it at a time.
	Slot string
	// Publication is created for Table (inserts only) when missing.
	Publication string
	// SlotFailover creates the slot as a failover slot on PostgreSQL 17 and later, so
	// that standbys with sync_replication_slots keep a copy a promotion carries over.
	// Ignored on older servers.
	SlotFailover bool
	// StatusInterval is how soon an LSN made safe by acks is confirmed to PostgreSQL.
	StatusInterval time.Duration
	// KeepaliveInterval is the longest gap between standby status updates. It is
	// lowered to a third of the server's wal_sender_timeout when that is shorter.
	KeepaliveInterval time.Duration
	// ShutdownTimeout bounds the wait for in-flight acks when the context ends.
	ShutdownTimeout time.Duration
	// MaxInFlightEvents and MaxInFlightBytes bound the events handed to the broker and
	// not yet acknowledged; reading from PostgreSQL pauses while they are reached.
	MaxInFlightEvents int
	MaxInFlightBytes  int64
	// ReconnectMin and ReconnectMax bound the backoff between reconnection attempts.
	ReconnectMin time.Duration
	ReconnectMax time.Duration

	// Delivery is AtLeastOnce (the default) or ExactlyOnce (transactions that carry
	// the stream position; a sink.Transactional, stream mode).
	Delivery Delivery

	// Mode is ModeStream (logical replication, the default) or ModePoll (the
	// FOR UPDATE SKIP LOCKED poller alone, for databases that cannot replicate).
	Mode Mode
	// OnPublish is what happens to a row once its event was acked: poller.Progress
	// (nothing per row; a published horizon per ProgressInterval; stream mode only),
	// poller.Mark (processed_at), poller.Delete, or poller.None (the application
	// deletes rows itself; stream mode only). Empty: Progress in stream mode, Mark in
	// poll mode.
	OnPublish poller.OnPublish
	// ProgressInterval is how often --on-publish progress takes a published horizon
	// and records the newest one the confirmed LSN covers, and, at most, how often a
	// stream records the LSN it confirmed (walrelay_confirmed; not with ExactlyOnce).
	ProgressInterval time.Duration
	// Retry is the policy for events that failed on their own: attempts, backoff,
	// dead letters.
	Retry poller.Policy
	// PollBatchSize rows are locked and published per poll transaction.
	PollBatchSize int
	// PollWorkers is how many poll transactions each table's poller keeps under way
	// at once in poll mode (poller.Config.Workers); stream mode's poller runs one.
	PollWorkers int
	// PollInterval is the poller's fallback interval (NOTIFY wakes it sooner in poll mode).
	PollInterval time.Duration
	// PublishTimeout bounds the poller's wait for a batch's acks; keep it above the
	// sink's own delivery timeout.
	PublishTimeout time.Duration
	// Retention is how long processed rows are kept before the background cleanup
	// deletes them (with OnPublish mark or progress), in batches. 0 disables it.
	Retention time.Duration

	// StartPaused starts the relay paused: it connects and holds the slot but reads
	// and publishes nothing until resumed (Relay.Resume, POST /resume).
	StartPaused bool
	// Registry receives the relay's metrics; nil: a registry of the relay's own, with
	// Go runtime and process collectors. Wrap a shared one with
	// prometheus.WrapRegistererWith to run several relays.
	Registry prometheus.Registerer
	// Gatherer is what /metrics serves (admin.Serve); nil: Registry, when it is a
	// prometheus.Gatherer too (a *prometheus.Registry is).
	Gatherer prometheus.Gatherer
	// AckTimeout bounds how long the oldest event handed to the broker may wait for
	// its answer: past it the relay logs at WARN, /readyz answers 503 and
	// walrelay_broker_up is 0, until the broker acknowledges again (0: not watched).
	AckTimeout time.Duration
	// BrokerProbeInterval is how often the sink's Ping asks the broker whether it
	// answers while no event is in flight, so that a broker lost while the outbox is
	// idle turns the same signals as AckTimeout does, within AckTimeout plus one
	// interval (and the broker watch's tick); each probe waits at most AckTimeout. Standbys probe too. 0 disables
	// it, as does an AckTimeout of 0 (docs/operations.md, "Health").
	BrokerProbeInterval time.Duration
	// BrokerAddrs are where the sink reaches its broker, for the logs and /readyz
	// while it does not acknowledge (sinks.Config.Addresses); New redacts them
	// (internal/redact), so a URL carrying a password or token may be given.
	BrokerAddrs []string
	// Published says how the sink makes records of events: the relay does not read
	// it; the admin API shows it (/status) and previews a dead letter's record with it.
	Published Published
	// StatsInterval is how often slot health and table counts are read.
	StatsInterval time.Duration
	// StallTimeout: slot lag growing while the confirmed LSN has not moved for this
	// long marks the relay stalled (metric, error log, /readyz fails).
	StallTimeout time.Duration
	// ProgressLogInterval is how often long work logs its progress: a catch-up
	// pass, and the WAL already written when a session starts (0: 5s).
	ProgressLogInterval time.Duration
	// HeartbeatInterval, when positive, writes a transactional logical message that
	// often while nothing is in flight, so the slot advances even when the server
	// would send nothing. 0 disables it.
	HeartbeatInterval time.Duration

	// MessagePrefix is the prefix of the transactional logical messages the stream
	// publishes as events (the table-less outbox, outbox.Emit); empty: none. It
	// needs PostgreSQL 14 or later.
	MessagePrefix string

	// Logger receives the relay's logs; nil means slog.Default().
	Logger *slog.Logger
	// TracerProvider, when set, gets one producer span per event the stream
	// publishes, from its transaction's commit to the broker's ack, a child of the
	// trace context in the event's traceparent and tracestate headers. nil: no
	// tracing, at no cost. The relay uses OpenTelemetry's API only; the program
	// brings the SDK and exporter.
	TracerProvider trace.TracerProvider
	// OnStream, when set, is called each time a session starts streaming: its slot
	// prepared and any catch-up pass finished. The service uses it to give back the
	// executable's pages that only the way there touched (docs/performance.md).
	OnStream func()

	// bookkeepingLag delays what the bookkeeping sees (poller.Lag): set by tests only.
	bookkeepingLag poller.Lag
}

// TableConfig is one of several outbox tables (Config.Tables).
type TableConfig struct {
	// Table is the outbox table, optionally schema-qualified.
	Table string
	// Columns names its columns.
	Columns outbox.Columns
	// TopicTemplate names its events' Kafka topic, NATS subject or Redis stream
	// ({aggregate_type}, {event_type}); empty: the sink's own template.
	TopicTemplate string
	// TopicRegex, when set, names the topic instead, as Debezium's route.topic.regex
	// does (record.Route): a whole match on the aggregate type becomes
	// TopicReplacement ($1, ${name}), any other value is its own topic.
	TopicRegex, TopicReplacement string
}

// OutboxTables is Tables, or the one table of Table and Columns. A table with
// neither a topic template nor a topic regex of its own takes TopicRegex.
func (c *Config) OutboxTables() []TableConfig {
	if len(c.Tables) > 0 {
		if c.TopicRegex == "" && c.TopicReplacement == "" {
			return c.Tables
		}
		tables := slices.Clone(c.Tables)
		for i := range tables {
			if tables[i].TopicTemplate == "" && tables[i].TopicRegex == "" && tables[i].TopicReplacement == "" {
				tables[i].TopicRegex, tables[i].TopicReplacement = c.TopicRegex, c.TopicReplacement
			}
		}
		return tables
	}
	return []TableConfig{{Table: c.Table, Columns: c.Columns, TopicRegex: c.TopicRegex, TopicReplacement: c.TopicReplacement}}
}

// pollWorkers is how many poll transactions each table's poller runs at once: one
// in stream mode, where it only retries handed-over rows.
func (c *Config) pollWorkers() int {
	if c.Mode == ModePoll {
		return c.PollWorkers
	}
	return 1
}

// PollInFlight is the most events the pollers have handed to the sink at once, which
// the sink's client must buffer without blocking (sinks.Window.PollBatch).
func (c *Config) PollInFlight() int {
	return c.PollBatchSize * c.pollWorkers() * len(c.OutboxTables())
}

// Mode selects how new rows are found.
type Mode string

const (
	// ModeStream reads inserts from the WAL through a logical replication slot.
	ModeStream Mode = "stream"
	// ModePoll polls the table with FOR UPDATE SKIP LOCKED, woken by LISTEN/NOTIFY.
	ModePoll Mode = "poll"
)

// OnPublishMode is OnPublish, or the mode's default when it is empty: Progress in
// stream mode, Mark in poll mode.
func (c *Config) OnPublishMode() poller.OnPublish {
	switch {
	case c.OnPublish != "":
		return c.OnPublish
	case c.Mode == ModePoll:
		return poller.Mark
	}
	return poller.Progress
}

// DefaultConfig returns the defaults the walrelay binary uses.
func DefaultConfig() Config {
	return Config{
		Table:             outbox.DefaultTable,
		Columns:           outbox.DefaultColumns(),
		Slot:              "walrelay",
		Publication:       "walrelay",
		SlotFailover:      true,
		Delivery:          AtLeastOnce,
		StatusInterval:    100 * time.Millisecond,
		KeepaliveInterval: 10 * time.Second,
		ShutdownTimeout:   10 * time.Second,
		MaxInFlightEvents: 10000,
		MaxInFlightBytes:  64 << 20,
		ReconnectMin:      500 * time.Millisecond,
		ReconnectMax:      30 * time.Second,
		Mode:              ModeStream,
		ProgressInterval:  time.Second,
		Retry:             poller.DefaultPolicy(),
		PollBatchSize:     1000,
		PollWorkers:       4,
		PollInterval:      time.Second,
		PublishTimeout:    2*time.Minute + 10*time.Second,
		Retention:         7 * 24 * time.Hour,
		AckTimeout:        10 * time.Second,
		StatsInterval:     10 * time.Second,
		StallTimeout:      5 * time.Minute,
		MessagePrefix:     outbox.DefaultMessagePrefix,
		// The broker watch's idle probe (docs/operations.md, "Health").
		BrokerProbeInterval: 5 * time.Second,
	}
}

var (
	slotName  = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)
	tableName = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_$]*\.)?[A-Za-z_][A-Za-z0-9_$]*$`)
)

// Validate checks the configuration without opening any connection. It leaves the
// sink to New, so that a program can check its settings before it builds one.
func (c *Config) Validate() error {
	return errors.Join(c.validateNames(), c.validateTimings(), c.validateModes())
}

// problems collects a configuration's errors.
type problems []error

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Errorf(format, args...)) }

// validateNames checks what the relay connects to and names.
func (c *Config) validateNames() error {
	var p problems
	if c.DatabaseURL == "" {
		p.add("database url is required (--database-url or WALRELAY_DATABASE_URL)")
	} else if _, err := pgxpool.ParseConfig(c.DatabaseURL); err != nil {
		p.add("database url: %w", dbconn.ParseError(err, c.DatabaseURL)) // the strictest parser of the ones Run uses
	}
	if c.PrimaryURL != "" {
		if _, err := pgxpool.ParseConfig(c.PrimaryURL); err != nil {
			p.add("primary url (--primary-url): %w", dbconn.ParseError(err, c.PrimaryURL))
		}
	}
	seen := map[string]bool{}
	for _, t := range c.OutboxTables() {
		if !tableName.MatchString(t.Table) {
			p.add("table %q is not a table name (name or schema.name)", t.Table)
			continue
		}
		if err := t.Columns.Validate(); err != nil && len(c.Tables) == 0 {
			p.add("%w", err)
		} else if err != nil {
			p.add("table %s: %w", t.Table, err)
		}
		if t.TopicTemplate != "" {
			if _, err := sink.ParseTemplate(t.TopicTemplate); err != nil {
				p.add("table %s: topic template: %w", t.Table, err)
			}
		}
		if err := t.checkRoute(); err != nil {
			p.add("table %s: %w", t.Table, err)
		}
		if q := qualifiedTable(t.Table); seen[q] {
			p.add("table %s is listed twice; list each outbox table once", q)
		} else {
			seen[q] = true
		}
	}
	if !slotName.MatchString(c.Slot) {
		p.add("slot %q: use 1 to 63 lowercase letters, digits and underscores", c.Slot)
	}
	if !tableName.MatchString(c.Publication) || len(c.Publication) > 63 {
		p.add("publication %q is not a valid name", c.Publication)
	}
	switch {
	case strings.ContainsRune(c.MessagePrefix, 0):
		p.add("messages prefix %q contains a NUL byte", c.MessagePrefix)
	case c.MessagePrefix == heartbeatPrefix:
		p.add("messages prefix %q is the heartbeat's; choose another (default %s)", c.MessagePrefix, outbox.DefaultMessagePrefix)
	}
	return errors.Join(p...)
}

// qualifiedTable is schema.name for a name that may omit the schema (public).
func qualifiedTable(table string) string {
	if strings.Contains(table, ".") {
		return table
	}
	return "public." + table
}

// validateTimings checks the intervals, timeouts and bounds.
func (c *Config) validateTimings() error {
	var p problems
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"status interval", c.StatusInterval}, {"keepalive interval", c.KeepaliveInterval},
		{"shutdown timeout", c.ShutdownTimeout}, {"reconnect min", c.ReconnectMin}, {"reconnect max", c.ReconnectMax},
		{"poll interval", c.PollInterval}, {"publish timeout", c.PublishTimeout},
		{"stats interval", c.StatsInterval}, {"stall timeout", c.StallTimeout}, {"progress interval", c.ProgressInterval},
	} {
		if d.v <= 0 {
			p.add("%s must be positive, got %s", d.name, d.v)
		}
	}
	if c.AckTimeout < 0 || c.AckTimeout > 0 && c.AckTimeout < 100*time.Millisecond {
		p.add("ack timeout must be 0 (not watched) or at least 100ms, got %s", c.AckTimeout)
	}
	if c.BrokerProbeInterval < 0 || c.BrokerProbeInterval > 0 && c.BrokerProbeInterval < 100*time.Millisecond {
		p.add("broker probe interval must be 0 (no probe) or at least 100ms, got %s", c.BrokerProbeInterval)
	}
	if c.KeepaliveInterval < c.StatusInterval {
		p.add("keepalive interval (%s) must not be shorter than status interval (%s)", c.KeepaliveInterval, c.StatusInterval)
	}
	if c.ReconnectMax < c.ReconnectMin {
		p.add("reconnect max (%s) must not be shorter than reconnect min (%s)", c.ReconnectMax, c.ReconnectMin)
	}
	if c.MaxInFlightEvents <= 0 {
		p.add("max in-flight events must be positive, got %d", c.MaxInFlightEvents)
	}
	if c.MaxInFlightBytes <= 0 {
		p.add("max in-flight bytes must be positive, got %d", c.MaxInFlightBytes)
	}
	if c.PollBatchSize <= 0 {
		p.add("poll batch size must be positive, got %d", c.PollBatchSize)
	}
	if c.PollWorkers <= 0 {
		p.add("poll workers must be positive, got %d", c.PollWorkers)
	}
	if c.Retention < 0 || c.HeartbeatInterval < 0 {
		p.add("retention and heartbeat interval must not be negative")
	}
	return errors.Join(p...)
}

// validateModes checks delivery, mode, on-publish and the retry policy together.
func (c *Config) validateModes() error {
	var p problems
	if err := c.validateDelivery(); err != nil {
		p.add("%w", err)
	}
	if c.Mode != ModeStream && c.Mode != ModePoll {
		p.add("mode %q: want stream or poll", c.Mode)
	}
	if c.Mode == ModePoll && c.PrimaryURL != "" {
		p.add("primary-url is for streaming from a hot standby; in poll mode point --database-url at the primary " +
			"and leave primary-url unset")
	}
	_, err := poller.ParseOnPublish(string(c.OnPublish))
	switch {
	case c.OnPublish == "": // the mode's default (OnPublishMode)
	case err != nil:
		p.add("%w", err)
	case c.Mode == ModePoll && c.OnPublish == poller.None:
		p.add("on-publish none needs mode stream: a poller must mark or delete what it published")
	case c.Mode == ModePoll && c.OnPublish == poller.Progress:
		p.add("on-publish progress needs mode stream: its horizon comes from the slot's confirmed LSN, and a " +
			"poller marks every row it publishes; leave on-publish unset (mark in poll mode) or set mark or delete")
	}
	if err := c.Retry.Validate(); err != nil {
		p.add("%w", err)
	}
	return errors.Join(p...)
}

// route is the table's topic routing by regular expression; nil without one.
func (t *TableConfig) route() (*record.Route, error) {
	if t.TopicRegex == "" {
		return nil, nil
	}
	return record.ParseRoute(t.TopicRegex, t.TopicReplacement)
}

func (t *TableConfig) checkRoute() error {
	if t.TopicRegex == "" && t.TopicReplacement != "" {
		return errors.New("topic-replacement needs topic-regex; set topic-regex, or name topics with topic-template")
	}
	_, err := t.route()
	return err
}

// GrantNeeds says which optional privileges on the outbox tables this configuration
// uses (replication.RelayGrants).
func (c *Config) GrantNeeds() catalog.GrantNeeds {
	mode := c.OnPublishMode()
	return catalog.GrantNeeds{Insert: mode == poller.None, Delete: mode == poller.Delete || c.Retention > 0}
}
