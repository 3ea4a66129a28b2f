package sinks_test

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/sink/sinks"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tweak func(*sinks.Config)
		want  string // substring of the error; "" means valid
	}{
		{"kafka", func(*sinks.Config) {}, ""},
		{"no brokers", func(c *sinks.Config) { c.Kafka.Brokers = nil }, "kafka brokers are required"},
		{"broker without port", func(c *sinks.Config) { c.Kafka.Brokers = []string{"kafka"} }, "not host:port"},
		{"bad template", func(c *sinks.Config) { c.TopicTemplate = "x.{nope}" }, "unknown placeholder"},
		{"zstd", func(c *sinks.Config) { c.Kafka.Compression = "zstd" }, ""},
		{"bad compression", func(c *sinks.Config) { c.Kafka.Compression = "brotli" }, "unknown compression"},
		{"short event timeout", func(c *sinks.Config) { c.Kafka.EventTimeout = 1 }, "event timeout"},
		{"unknown broker", func(c *sinks.Config) { c.Kind = "mqtt" }, "want kafka, nats, rabbitmq, redis, sqs, pubsub or http"},
		{"sqs fifo", func(c *sinks.Config) { c.Kind, c.TopicTemplate = sinks.SQS, "outbox-{aggregate_type}.fifo" }, ""},
		{"sqs with the kafka template", func(c *sinks.Config) { c.Kind = sinks.SQS }, "letters, digits, '-' and '_' only"},
		{"sqs bad endpoint", func(c *sinks.Config) {
			c.Kind, c.TopicTemplate, c.SQS.Endpoint = sinks.SQS, "outbox", "127.0.0.1:9324"
		}, "sqs sink: sqs endpoint"},
		{"pubsub without project", func(c *sinks.Config) { c.Kind = sinks.PubSub }, "pubsub sink: project is required"},
		{"pubsub", func(c *sinks.Config) { c.Kind, c.PubSub.Project = sinks.PubSub, "p" }, ""},
		{"http without url", func(c *sinks.Config) { c.Kind = sinks.HTTP }, "http sink: url is required"},
		{"http", func(c *sinks.Config) { c.Kind, c.HTTP.URL = sinks.HTTP, "https://hooks.example.com/{aggregate_type}" }, ""},
		{"nats without url", func(c *sinks.Config) { c.Kind, c.NATS.URL = sinks.NATS, "" }, "nats sink"},
		{"redis", func(c *sinks.Config) { c.Kind, c.Kafka.Brokers = sinks.Redis, nil }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := sinks.DefaultConfig()
			c.Kafka.Brokers = []string{"127.0.0.1:9092"}
			tc.tweak(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
}

// The record settings (Config.Format, once for every broker) reach every sink, whose
// messages follow package record; each refuses, rather than ignores, the parts its
// messages have no room for.
func TestRecordFormat(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kind  sinks.Kind
		tweak func(*record.Format)
		want  string // substring of the error; "" means valid
	}{
		{"kafka value schemas", sinks.Kafka, func(f *record.Format) { f.ValueConverter, f.ValueSchemas = record.JSON, true }, ""},
		{"kafka schemas without json", sinks.Kafka, func(f *record.Format) { f.KeySchemas = true }, "key-converter-schemas-enable needs key-converter json"},
		{"nats default", sinks.NATS, func(*record.Format) {}, ""},
		{"nats value json", sinks.NATS, func(f *record.Format) { f.ValueConverter, f.ValueSchemas = record.JSON, true }, ""},
		{"nats debezium headers", sinks.NATS, func(f *record.Format) { f.IDHeaderOnly, f.TombstoneOnEmpty = true, true }, ""},
		{"nats key json", sinks.NATS, func(f *record.Format) { f.KeyConverter = record.JSON }, "NATS messages have no key"},
		{"nats event timestamp", sinks.NATS, func(f *record.Format) { f.EventTimestamp = true }, "JetStream stamps"},
		{"redis value json", sinks.Redis, func(f *record.Format) { f.ValueConverter, f.IDHeaderOnly = record.JSON, true }, ""},
		{"redis key json", sinks.Redis, func(f *record.Format) { f.KeyConverter = record.JSON }, "no key"},
		{"redis event timestamp", sinks.Redis, func(f *record.Format) { f.EventTimestamp = true }, "record-timestamp"},
		{"rabbitmq value json", sinks.RabbitMQ, func(f *record.Format) { f.ValueConverter, f.EventTimestamp = record.JSON, true }, ""},
		{"rabbitmq key json", sinks.RabbitMQ, func(f *record.Format) { f.KeyConverter = record.JSON }, "no key"},
		{"sqs key json", sinks.SQS, func(f *record.Format) { f.KeyConverter = record.JSON }, "no key"},
		{"pubsub value json", sinks.PubSub, func(f *record.Format) { f.ValueConverter, f.IDHeaderOnly = record.JSON, true }, ""},
		{"pubsub key json", sinks.PubSub, func(f *record.Format) { f.KeyConverter = record.JSON }, "no key"},
		{"pubsub event timestamp", sinks.PubSub, func(f *record.Format) { f.EventTimestamp = true }, "publishTime"},
		{"http value bytearray", sinks.HTTP, func(f *record.Format) { f.ValueConverter = record.ByteArray }, ""},
		{"http key json", sinks.HTTP, func(f *record.Format) { f.KeyConverter = record.JSON }, "no key"},
		{"http event timestamp", sinks.HTTP, func(f *record.Format) { f.EventTimestamp = true }, "record-timestamp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := sinks.DefaultConfig()
			c.Kind = tc.kind
			c.Kafka.Brokers = []string{"127.0.0.1:9092"}
			c.NATS.URL = "nats://127.0.0.1:4222"
			c.PubSub.Project = "p"
			c.HTTP.URL = "http://127.0.0.1:8080/hooks"
			tc.tweak(&c.Format)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
}
