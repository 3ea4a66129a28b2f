// Package sinks builds the built-in sinks from one configuration, for the walrelay
// binary and for programs that let their users choose the broker. The relay itself
// knows sinks only through sink.Sink: a program embedding it with one broker
// imports that broker's package and links no other client.
package sinks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/walrelay/walrelay/internal/backoff"
	"github.com/walrelay/walrelay/internal/redact"
	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/sink"
	httpsink "github.com/walrelay/walrelay/sink/http"
	"github.com/walrelay/walrelay/sink/kafka"
	"github.com/walrelay/walrelay/sink/nats"
	"github.com/walrelay/walrelay/sink/pubsub"
	"github.com/walrelay/walrelay/sink/rabbitmq"
	"github.com/walrelay/walrelay/sink/redis"
	"github.com/walrelay/walrelay/sink/sqs"
)

// Kind names a broker.
type Kind string

const (
	Kafka    Kind = "kafka"
	NATS     Kind = "nats"
	RabbitMQ Kind = "rabbitmq"
	Redis    Kind = "redis"
	SQS      Kind = "sqs"
	PubSub   Kind = "pubsub"
	HTTP     Kind = "http"
)

// Config selects a broker and configures it.
type Config struct {
	Kind Kind
	// TopicTemplate names the Kafka topic, the NATS subject, the Redis stream, the SQS
	// queue and the Pub/Sub topic; {aggregate_type} and {event_type} are replaced. RabbitMQ has its
	// own templates, and the HTTP sink its URL (HTTP.URL).
	TopicTemplate string
	// Format is how an event becomes a record (key, value, headers, timestamp),
	// the same for every broker: the selected broker's own Format (Kafka.Format,
	// NATS.Format, ...) is set from it, whatever it held.
	Format   record.Format
	Kafka    kafka.Config
	NATS     nats.Config
	RabbitMQ rabbitmq.Config
	Redis    redis.Config
	SQS      sqs.Config
	PubSub   pubsub.Config
	HTTP     httpsink.Config
}

// DefaultConfig is Kafka, with each broker's defaults.
func DefaultConfig() Config {
	return Config{
		Kind:          Kafka,
		TopicTemplate: kafka.DefaultTopicTemplate,
		Kafka: kafka.Config{Compression: kafka.DefaultCompression, ProgressTopic: kafka.DefaultProgressTopic,
			EventTimeout: 2 * time.Minute},
		NATS:     nats.DefaultConfig(),
		RabbitMQ: rabbitmq.DefaultConfig(),
		Redis:    redis.DefaultConfig(),
		SQS:      sqs.DefaultConfig(),
		PubSub:   pubsub.DefaultConfig(),
		HTTP:     httpsink.DefaultConfig(),
	}
}

// Window is what the relay may have in flight at once. Publish never waits inside a
// sink; Kafka's client is sized above the window, so that the stream's records go
// straight to franz-go rather than waiting in the sink (sink/kafka, feed.go).
type Window struct {
	Events int
	Bytes  int64
	// PollBatch is the most events the pollers publish at once (relay.Config.PollInFlight).
	PollBatch int
}

// Validate checks the selected broker's configuration without connecting.
func (c Config) Validate() error {
	var err error
	switch c.Kind {
	case Kafka:
		k := c.kafka(Window{})
		err = k.Validate()
	case NATS:
		n := c.nats()
		err = n.Validate()
	case RabbitMQ:
		r := c.rabbitmq()
		err = r.Validate()
	case Redis:
		r := c.redis()
		err = r.Validate()
	case SQS:
		q := c.sqs()
		err = q.Validate()
	case PubSub:
		p := c.pubsub(nil)
		err = p.Validate()
	case HTTP:
		h := c.http(nil)
		err = h.Validate()
	default:
		return fmt.Errorf("sink %q: want kafka, nats, rabbitmq, redis, sqs, pubsub or http", c.Kind)
	}
	if err != nil && c.Kind != Kafka {
		return fmt.Errorf("%s sink: %w", c.Kind, err)
	}
	return err
}

func (c Config) kafka(w Window) kafka.Config {
	k := c.Kafka
	k.TopicTemplate = c.TopicTemplate
	k.Format = c.Format
	k.MaxBufferedEvents = 2*w.Events + w.PollBatch + 1000
	k.MaxBufferedBytes = int(2*w.Bytes) + 16<<20
	return k
}

func (c Config) nats() nats.Config {
	n := c.NATS
	n.SubjectTemplate = c.TopicTemplate
	n.Format = c.Format
	return n
}

func (c Config) rabbitmq() rabbitmq.Config {
	r := c.RabbitMQ
	r.Format = c.Format
	return r
}

func (c Config) redis() redis.Config {
	r := c.Redis
	r.StreamTemplate = c.TopicTemplate
	r.Format = c.Format
	return r
}

func (c Config) sqs() sqs.Config {
	q := c.SQS
	q.QueueTemplate = c.TopicTemplate
	q.Format = c.Format
	return q
}

func (c Config) pubsub(log *slog.Logger) pubsub.Config {
	p := c.PubSub
	p.TopicTemplate = c.TopicTemplate
	p.Format = c.Format
	p.Logger = log
	return p
}

func (c Config) http(log *slog.Logger) httpsink.Config {
	h := c.HTTP
	h.Format = c.Format
	h.Logger = log
	return h
}

// Open builds the selected broker's client, sized above w. A client that must reach
// its broker to start (RabbitMQ) is retried with backoff between retryMin and
// retryMax until ctx ends; the others fail only on their configuration, which
// retrying cannot fix.
func Open(ctx context.Context, c Config, w Window, log *slog.Logger, retryMin, retryMax time.Duration) (sink.Sink, error) {
	build := func() (sink.Sink, error) {
		switch c.Kind {
		case NATS:
			return nats.New(c.nats())
		case RabbitMQ:
			return rabbitmq.New(c.rabbitmq())
		case Redis:
			return redis.New(c.redis())
		case SQS:
			return sqs.New(c.sqs())
		case PubSub:
			return pubsub.New(c.pubsub(log))
		case HTTP:
			return httpsink.New(c.http(log))
		}
		return kafka.New(c.kafka(w))
	}
	retry := backoff.New(retryMin, retryMax)
	for {
		snk, err := build()
		if err == nil || c.Kind != RabbitMQ {
			return snk, err
		}
		wait := retry.Next()
		log.Error("cannot start the "+string(c.Kind)+" client; check its address and that the broker is up; retrying",
			"err", err, "retry_in", wait.Round(time.Millisecond).String())
		if !backoff.Sleep(ctx, wait) {
			return nil, errors.Join(ctx.Err(), err)
		}
	}
}

// Addresses are where the selected broker is reached, for logs and /readyz: Kafka's
// brokers, or the other brokers' URLs and endpoints redacted (internal/redact).
func (c Config) Addresses() []string {
	var addrs []string
	switch c.Kind {
	case Kafka:
		addrs = c.Kafka.Brokers
	case NATS:
		addrs = strings.Split(c.NATS.URL, ",")
	case RabbitMQ:
		addrs = []string{c.RabbitMQ.URL}
	case Redis:
		addrs = []string{c.Redis.URL}
	case SQS:
		if c.SQS.Endpoint != "" {
			addrs = []string{c.SQS.Endpoint}
		}
	case PubSub:
		if c.PubSub.Endpoint != "" {
			addrs = []string{c.PubSub.Endpoint}
		}
	case HTTP:
		addrs = []string{c.HTTP.URL}
	}
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, redact.URL(strings.TrimSpace(a)))
	}
	return out
}
