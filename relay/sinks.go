package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/kafka"
	"github.com/walrelay/walrelay/sink/nats"
	"github.com/walrelay/walrelay/sink/rabbitmq"
	"github.com/walrelay/walrelay/sink/redis"
)

// SinkKind names a broker.
type SinkKind string

const (
	SinkKafka    SinkKind = "kafka"
	SinkNATS     SinkKind = "nats"
	SinkRabbitMQ SinkKind = "rabbitmq"
	SinkRedis    SinkKind = "redis"
)

// Brokers other than Kafka. TopicTemplate names the NATS subject and the Redis
// stream too; RabbitMQ has its exchange and routing-key templates.
type (
	NATSConfig     = nats.Config
	RabbitMQConfig = rabbitmq.Config
	RedisConfig    = redis.Config
)

func (c *Config) validateSink() error {
	switch c.SinkKind {
	case SinkKafka:
		return nil // checked with the Kafka settings
	case SinkNATS:
		n := c.natsConfig()
		return n.Validate()
	case SinkRabbitMQ:
		return c.RabbitMQ.Validate()
	case SinkRedis:
		r := c.redisConfig()
		return r.Validate()
	}
	return fmt.Errorf("sink %q: want kafka, nats, rabbitmq or redis", c.SinkKind)
}

func (c *Config) natsConfig() nats.Config {
	n := c.NATS
	n.SubjectTemplate = c.TopicTemplate
	return n
}

func (c *Config) redisConfig() redis.Config {
	r := c.Redis
	r.StreamTemplate = c.TopicTemplate
	return r
}

// kafkaConfig is the Kafka client configuration, shared by the sink and the
// exactly-once producer.
func (r *Relay) kafkaConfig() kafka.Config {
	return kafka.Config{
		Brokers:       r.cfg.KafkaBrokers,
		TopicTemplate: r.cfg.TopicTemplate,
		// Above the window: Publish must never block inside franz-go.
		MaxBufferedEvents: 2*r.cfg.MaxInFlightEvents + r.cfg.PollBatchSize + 1000,
		MaxBufferedBytes:  int(2*r.cfg.MaxInFlightBytes) + 16<<20,
		MaxMessageBytes:   r.cfg.MaxMessageBytes,
		Compression:       r.cfg.KafkaCompression,
		EventTimeout:      r.cfg.EventTimeout,
		Security:          r.cfg.KafkaSecurity,
		Opts:              r.cfg.KafkaOpts,
	}
}

// newSink builds the configured broker client. Clients that must reach their broker
// to start (RabbitMQ) are retried with backoff until ctx ends.
func (r *Relay) newSink(ctx context.Context) (sink.Sink, error) {
	build := func() (sink.Sink, error) {
		switch r.cfg.SinkKind {
		case SinkNATS:
			n := r.cfg.natsConfig()
			return nats.New(n)
		case SinkRabbitMQ:
			return rabbitmq.New(r.cfg.RabbitMQ)
		case SinkRedis:
			rc := r.cfg.redisConfig()
			rc.MaxBufferedEvents = max(rc.MaxBufferedEvents, r.kafkaConfig().MaxBufferedEvents)
			return redis.New(rc)
		}
		return kafka.New(r.kafkaConfig())
	}
	delay := r.cfg.ReconnectMin
	for {
		snk, err := build()
		if err == nil {
			return snk, nil
		}
		wait := jitter(delay)
		r.log.Error("cannot start the "+string(r.cfg.SinkKind)+" client; check its address and that the broker is up; retrying",
			"err", err, "retry_in", wait.Round(time.Millisecond).String())
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, errors.Join(ctx.Err(), err)
		}
		delay = min(2*delay, r.cfg.ReconnectMax)
	}
}
