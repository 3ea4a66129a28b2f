// Package kafka is the Kafka sink, built on franz-go: an idempotent producer with
// acks=all, so a record is acknowledged only when every in-sync replica has it, and
// retries keep per-partition order.
//
// Records: the topic comes from a template, the key is the aggregate id (so one
// aggregate maps to one partition), the value is the payload, and the headers are
// id, event_type, aggregate_type, aggregate_id and created_at (RFC 3339).
package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/sink"
)

// DefaultTopicTemplate is Debezium's outbox router default, so consumers can move over.
const DefaultTopicTemplate = "outbox.event.{aggregate_type}"

// Config of the Kafka sink.
type Config struct {
	Brokers []string
	// TopicTemplate may use {aggregate_type} and {event_type}.
	TopicTemplate string
	// MaxBufferedEvents and MaxBufferedBytes bound the client's buffer; keep them above
	// the relay's in-flight window so Publish never blocks.
	MaxBufferedEvents int
	MaxBufferedBytes  int
	// MaxMessageBytes is the largest record batch the producer builds; keep it at or
	// below the brokers' message.max.bytes. 0: franz-go's default (about 1 MB).
	MaxMessageBytes int
	// EventTimeout is how long one record may keep failing with retriable errors
	// before it counts as an event failure (when others are acked meanwhile) or a
	// broker outage (when none are). 0: retry for ever.
	EventTimeout time.Duration
	// Security: TLS and SASL.
	Security Security
	// Opts are passed to franz-go after walrelay's own, so they win.
	Opts []kgo.Opt
}

// Sink publishes to Kafka.
type Sink struct {
	client  *kgo.Client
	topic   sink.Template
	lastAck atomic.Int64 // unix nanoseconds of the newest acknowledgement
}

// New creates the client; it connects lazily.
func New(cfg Config) (*Sink, error) {
	tmpl, err := sink.ParseTemplate(cfg.TopicTemplate)
	if err != nil {
		return nil, err
	}
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("kafka: no brokers configured")
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.AllowAutoTopicCreation(),
		kgo.ClientID("walrelay"),
	}
	if cfg.MaxBufferedEvents > 0 {
		opts = append(opts, kgo.MaxBufferedRecords(cfg.MaxBufferedEvents))
	}
	if cfg.MaxBufferedBytes > 0 {
		opts = append(opts, kgo.MaxBufferedBytes(cfg.MaxBufferedBytes))
	}
	if cfg.MaxMessageBytes > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(int32(cfg.MaxMessageBytes)))
	}
	if cfg.EventTimeout > 0 {
		opts = append(opts, kgo.RecordDeliveryTimeout(cfg.EventTimeout))
	}
	secOpts, err := cfg.Security.Opts()
	if err != nil {
		return nil, err
	}
	opts = append(opts, secOpts...)
	opts = append(opts, cfg.Opts...)
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	return &Sink{client: client, topic: tmpl}, nil
}

// Publish produces one record; see sink.Sink.
func (s *Sink) Publish(e *outbox.Event, done func(error)) {
	rec := &kgo.Record{
		Topic: s.topic.Render(e),
		Key:   []byte(e.AggregateID),
		Value: e.Payload,
		Headers: []kgo.RecordHeader{
			{Key: "id", Value: []byte(e.ID)},
			{Key: "event_type", Value: []byte(e.EventType)},
			{Key: "aggregate_type", Value: []byte(e.AggregateType)},
			{Key: "aggregate_id", Value: []byte(e.AggregateID)},
			{Key: "created_at", Value: e.CreatedAt.UTC().AppendFormat(nil, time.RFC3339Nano)},
		},
	}
	// The background context: a record must not fail because the caller is stopping;
	// the relay's window keeps the buffer from filling, so this does not block.
	produced := time.Now().UnixNano()
	s.client.Produce(context.Background(), rec, func(_ *kgo.Record, err error) {
		if err == nil {
			s.lastAck.Store(time.Now().UnixNano())
			done(nil)
			return
		}
		done(s.classify(err, produced))
	})
}

// classify tells a failure of this record from a failure of the broker: errors the
// broker gives for one record and will give again (too large, invalid or forbidden
// topic, ...), or a deadline that ran out while other records were acknowledged.
func (s *Sink) classify(err error, produced int64) error {
	var kErr *kerr.Error
	switch {
	case errors.As(err, &kErr) && !kErr.Retriable,
		errors.Is(err, kerr.UnknownTopicOrPartition): // surfaced only once franz-go gave up on it
		return &sink.EventError{Err: err}
	case errors.Is(err, kgo.ErrRecordTimeout) || errors.Is(err, kgo.ErrRecordRetries):
		if s.lastAck.Load() > produced {
			return &sink.EventError{Err: fmt.Errorf("%w (other records were acknowledged meanwhile)", err)}
		}
	}
	return err
}

// Flush waits for every produced record's outcome.
func (s *Sink) Flush(ctx context.Context) error { return s.client.Flush(ctx) }

// Ping checks that a broker answers.
func (s *Sink) Ping(ctx context.Context) error { return s.client.Ping(ctx) }

// Close closes the client.
func (s *Sink) Close() { s.client.Close() }
