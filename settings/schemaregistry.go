package settings

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/schemaregistry"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/sinks"
)

// bytesSinks are the sinks whose messages carry bytes, so the registry converters'
// framed records (docs/configuration.md, "Schema registry").
var bytesSinks = []sinks.Kind{sinks.Kafka, sinks.NATS, sinks.RabbitMQ, sinks.Redis, sinks.PubSub, sinks.HTTP}

// setupRegistry checks what the registry converters need and, when a converter
// uses the registry, gives the sink's Format and the relay the one id cache and
// the client that fills it. The client connects on its first call.
func (s *Settings) setupRegistry(cfg *relay.Config) error {
	f := &s.Sinks.Format
	key, value := f.KeyConverter.Registered(), f.ValueConverter.Registered()
	if !key && !value {
		return nil
	}
	var errs []error
	if s.Sinks.Kind == sinks.SQS {
		names := make([]string, len(bytesSinks))
		for i, k := range bytesSinks {
			names[i] = string(k)
		}
		errs = append(errs, fmt.Errorf("key-converter and value-converter avro, protobuf and json-schema write bytes "+
			"(Confluent's wire format), and an SQS message carries text only; use --sink %s, or a string or json converter",
			strings.Join(names, ", ")))
	}
	// Protobuf's schemas are messages, always named; Avro's and JSON Schema's are
	// records only for column-envelope's struct.
	if key && s.keyStrategy != record.TopicName && f.KeyConverter != record.Protobuf {
		errs = append(errs, fmt.Errorf("key-subject-name-strategy %s needs a key schema with a record name, and the key is "+
			"the aggregate id, a string; set key-subject-name-strategy topic", s.keyStrategy))
	}
	if value && f.Native.Enabled {
		if s.valueStrategy != record.TopicName {
			errs = append(errs, errors.New("value-subject-name-strategy names subjects of schemas walrelay registers; "+
				"native-payload fetches its schema through native-payload-subject: leave value-subject-name-strategy topic"))
		}
		for _, t := range cfg.OutboxTables() {
			if len(t.Columns.Envelope) > 0 {
				errs = append(errs, fmt.Errorf("native-payload writes the payload's own bytes, which hold no envelope columns "+
					"(table %s sets column-envelope); leave column-envelope empty", t.Table))
			}
		}
	}
	if value && !f.Native.Enabled && s.valueStrategy != record.TopicName && f.ValueConverter != record.Protobuf {
		for _, t := range cfg.OutboxTables() {
			if len(t.Columns.Envelope) == 0 {
				errs = append(errs, fmt.Errorf("value-subject-name-strategy %s needs a value schema with a record name, "+
					"and table %s's value is its payload, which has none (only column-envelope's struct has one); "+
					"set value-subject-name-strategy topic, or column-envelope", s.valueStrategy, t.Table))
			}
		}
	}
	if value && !f.Native.Enabled {
		for _, t := range cfg.OutboxTables() {
			if len(t.Columns.Envelope) > 0 && f.TopicPrefix == "" {
				errs = append(errs, fmt.Errorf("column-envelope (table %s) with value-converter %s names the value's record "+
					"after the Debezium connector's topic.prefix; set topic-prefix to it", t.Table, f.ValueConverter))
			}
		}
	}
	if err := s.Registry.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	client, err := schemaregistry.New(s.Registry)
	if err != nil {
		return err
	}
	tmpl, err := sink.ParseTemplate(s.Sinks.TopicTemplate)
	if err != nil {
		return fmt.Errorf("topic-template: %w", err)
	}
	topics := &topicNames{def: tmpl}
	f.Schemas = &record.Schemas{KeyStrategy: s.keyStrategy, ValueStrategy: s.valueStrategy, Topic: topics.render}
	format := *f
	cfg.Format, cfg.SchemaRegistry = &format, client
	return nil
}

// topicNames renders the topic the subject strategies name subjects after, once
// per template, aggregate type and event type.
type topicNames struct {
	def       sink.Template
	templates sink.Templates
	mu        sync.Mutex
	m         map[[3]string]string
}

func (c *topicNames) render(e *outbox.Event) string {
	key := [3]string{e.TopicTemplate, e.AggregateType, e.EventType}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.m[key]; ok {
		return t
	}
	t := c.templates.Render(c.def, e)
	if c.m == nil || len(c.m) > 10000 { // bounded, as the Kafka sink's
		c.m = make(map[[3]string]string)
	}
	c.m[[3]string{strings.Clone(key[0]), strings.Clone(key[1]), strings.Clone(key[2])}] = t
	return t
}
