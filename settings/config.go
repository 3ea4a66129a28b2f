package settings

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/walrelay/walrelay/internal/redact"
	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/sink/sinks"
	"github.com/walrelay/walrelay/sink/sqs"
)

// Logger builds the process logger from log-level and log-format, writing to stderr
// with every loaded URL redacted (LoadedURLs).
func (s *Settings) Logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(s.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: want debug, info, warn or error, got %q", s.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch s.logFormat {
	case "json":
		return slog.New(redact.Handler(slog.NewJSONHandler(os.Stderr, opts), LoadedURLs)), nil
	case "text":
		return slog.New(redact.Handler(slog.NewTextHandler(os.Stderr, opts), LoadedURLs)), nil
	default:
		return nil, fmt.Errorf("--log-format: want json or text, got %q", s.logFormat)
	}
}

// RelayConfig checks every setting, then builds the sink and returns the relay's
// configuration with it; the caller closes the sink after the relay stops.
func (s *Settings) RelayConfig(ctx context.Context, logger *slog.Logger) (relay.Config, error) {
	cfg, err := s.CheckedConfig(logger)
	if err != nil {
		return cfg, err
	}
	return s.OpenSink(ctx, cfg, logger)
}

// CheckedConfig checks every setting and returns the relay's configuration, without
// its sink.
func (s *Settings) CheckedConfig(logger *slog.Logger) (relay.Config, error) {
	cfg := s.Relay
	cfg.Logger = logger
	cfg.BrokerAddrs = s.Sinks.Addresses()
	if s.Sinks.Kafka.EventTimeout > 0 {
		cfg.PublishTimeout = s.Sinks.Kafka.EventTimeout + 10*time.Second
	}
	var eoSink, partitionSink error
	if cfg.Delivery == relay.ExactlyOnce && s.Sinks.Kind != sinks.Kafka {
		eoSink = fmt.Errorf("delivery exactly-once needs --sink kafka (its transactions carry the stream position), not %s; "+
			"use --delivery at-least-once and let consumers deduplicate on the event id", s.Sinks.Kind)
	}
	if s.Sinks.Kind != sinks.Kafka {
		for _, t := range cfg.OutboxTables() {
			if t.Columns.Partition != "" {
				partitionSink = fmt.Errorf("column-partition %s (table %s): partitions are Kafka's; --sink %s has none, so leave column-partition empty",
					t.Columns.Partition, t.Table, s.Sinks.Kind)
			}
		}
	}
	envelope := checkEnvelope(s.Sinks, cfg.OutboxTables())
	records := s.PrepareRecords(&cfg)
	cfg.Published = relay.Published{Sink: string(s.Sinks.Kind), TopicTemplate: s.Sinks.TopicTemplate, Format: s.Sinks.Format}
	return cfg, errors.Join(records, s.Sinks.Validate(), cfg.Validate(), s.Admin.Validate(), eoSink, partitionSink, envelope,
		s.checkHeaderKeys(cfg), s.checkSQS(cfg))
}

// PrepareRecords completes the record format from the tables (the expanded
// payload's schema name) and, when a converter uses a schema registry, gives the
// sink's format and cfg the one id cache and the registry client (setupRegistry):
// what publishes, `walrelay replay` included, needs it before the sink is opened.
func (s *Settings) PrepareRecords(cfg *relay.Config) error {
	if err := setExpandedSchemaName(&s.Sinks, cfg.OutboxTables()); err != nil {
		return err
	}
	return s.setupRegistry(cfg)
}

// checkHeaderKeys refuses header columns under the keys walrelay's own headers
// use, which depend on record-headers: under debezium only id is walrelay's
// (record.Format.Own), so event_type and the like are the columns' to use.
func (s *Settings) checkHeaderKeys(cfg relay.Config) error {
	if s.Sinks.Format.IDHeaderOnly {
		return nil
	}
	var errs []error
	for _, t := range cfg.OutboxTables() {
		if err := t.Columns.CheckWalrelayHeaders(); err != nil && len(cfg.Tables) == 0 {
			errs = append(errs, err)
		} else if err != nil {
			errs = append(errs, fmt.Errorf("table %s: %w", t.Table, err))
		}
	}
	return errors.Join(errs...)
}

// OpenSink logs the start and builds the sink of cfg (CheckedConfig's); the caller
// closes the sink after the relay stops.
func (s *Settings) OpenSink(ctx context.Context, cfg relay.Config, logger *slog.Logger) (relay.Config, error) {
	s.logStartup(logger, cfg)
	if s.Sinks.Kafka.EventTimeout != sinks.DefaultConfig().Kafka.EventTimeout {
		logger.Warn("event-timeout is deprecated: it is checked only when the producer retries a record, so a broker that "+
			"stops answering may never trip it; ack-timeout says within seconds when the broker stops acknowledging",
			"event_timeout", s.Sinks.Kafka.EventTimeout.String(), "ack_timeout", cfg.AckTimeout.String())
	}
	snk, err := sinks.Open(ctx, s.Sinks, sinks.Window{Events: cfg.MaxInFlightEvents, Bytes: cfg.MaxInFlightBytes,
		PollBatch: cfg.PollInFlight()}, logger, cfg.ReconnectMin, cfg.ReconnectMax)
	cfg.Sink = snk
	return cfg, err
}

// checkSQS checks what the SQS sink needs of each outbox table: queue names its
// topic template can render, and headers that fit SQS's 10 message attributes.
func (s *Settings) checkSQS(cfg relay.Config) error {
	if s.Sinks.Kind != sinks.SQS {
		return nil
	}
	var errs []error
	for _, t := range cfg.OutboxTables() {
		if t.TopicTemplate != "" {
			if err := sqs.CheckQueueTemplate(t.TopicTemplate); err != nil {
				errs = append(errs, fmt.Errorf("table %s: %w", t.Table, err))
			}
		}
		if err := sqs.CheckRecordColumns(s.Sinks.Format, t.Columns); err != nil {
			errs = append(errs, fmt.Errorf("table %s: %w", t.Table, err))
		}
	}
	return errors.Join(errs...)
}

// checkEnvelope refuses envelope columns where walrelay cannot write the router's
// struct as Connect would: the JSON converter with schemas without a topic prefix
// (the struct's schema is named after it), the bytearray converter (Connect's
// refuses a struct).
func checkEnvelope(sc sinks.Config, tables []relay.TableConfig) error {
	for _, t := range tables {
		if len(t.Columns.Envelope) == 0 {
			continue
		}
		switch {
		case sc.Format.ValueConverter == record.ByteArray:
			return fmt.Errorf("column-envelope (table %s) needs value-converter json or string: a struct has no bytes of its own", t.Table)
		case sc.Format.ValueSchemas && sc.Format.TopicPrefix == "":
			return fmt.Errorf("column-envelope (table %s) with value-converter-schemas-enable names the value's schema after "+
				"the Debezium connector's topic.prefix; set topic-prefix to it, or value-converter-schemas-enable false", t.Table)
		}
	}
	return nil
}

// setExpandedSchemaName names the schema of an expanded payload after the payload
// column, as Debezium's router does (record.ExpandJSON.PayloadColumn). The name is
// the sink's, so with value schemas every table must name the column alike.
func setExpandedSchemaName(sc *sinks.Config, tables []relay.TableConfig) error {
	x := &sc.Format.ExpandJSON
	for i, t := range tables {
		if i == 0 {
			x.PayloadColumn = t.Columns.Payload
			continue
		}
		if x.Enabled && sc.Format.ValueSchemas && t.Columns.Payload != x.PayloadColumn {
			return fmt.Errorf("expand-json-payload with value-converter-schemas-enable names the payload's schema after column-payload, "+
				"which is %s in table %s but %s in table %s; give the tables one payload column name, or set value-converter-schemas-enable false",
				x.PayloadColumn, tables[0].Table, t.Columns.Payload, t.Table)
		}
	}
	return nil
}
