package relay_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/kafka"
)

// validConfig has a Kafka sink, which connects only when used.
func validConfig(t *testing.T) relay.Config {
	c := relay.DefaultConfig()
	c.DatabaseURL = "postgres://relay:s3cret@127.0.0.1:5432/app"
	snk, err := kafka.New(kafka.Config{Brokers: []string{"127.0.0.1:9092"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(snk.Close)
	c.Sink = snk
	return c
}

// plainSink is a sink without transactions; nothing is published to it.
type plainSink struct{ sink.Sink }

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tweak func(*relay.Config)
		want  string // substring of the error; "" means valid
	}{
		{"defaults", func(*relay.Config) {}, ""},
		{"two tables", func(c *relay.Config) {
			c.Tables = []relay.TableConfig{{Table: "outbox_events", Columns: outbox.DefaultColumns()},
				{Table: "tenant_b.outbox", Columns: outbox.DefaultColumns(), TopicTemplate: "b.{event_type}"}}
		}, ""},
		{"table listed twice", func(c *relay.Config) {
			c.Tables = []relay.TableConfig{{Table: "outbox_events", Columns: outbox.DefaultColumns()},
				{Table: "public.outbox_events", Columns: outbox.DefaultColumns()}}
		}, "public.outbox_events is listed twice"},
		{"bad table template", func(c *relay.Config) {
			c.Tables = []relay.TableConfig{{Table: "a.outbox", Columns: outbox.DefaultColumns(), TopicTemplate: "x.{tenant}"}}
		}, "table a.outbox: topic template"},
		{"bad table columns", func(c *relay.Config) {
			c.Tables = []relay.TableConfig{{Table: "a.outbox", Columns: outbox.Columns{ID: "id"}}}
		}, "table a.outbox: column-aggregate-type"},
		{"topic regex", func(c *relay.Config) { c.TopicRegex, c.TopicReplacement = "(order|customer)_(.*)", "$1.$2" }, ""},
		{"table topic regex", func(c *relay.Config) {
			c.Tables = []relay.TableConfig{{Table: "a.outbox", Columns: outbox.DefaultColumns(), TopicRegex: "(?=x)(.*)", TopicReplacement: "$1"}}
		}, "table a.outbox: topic-regex \"(?=x)(.*)\" uses a lookahead"},
		{"top-level topic regex for tables", func(c *relay.Config) {
			c.TopicRegex, c.TopicReplacement = "(.*)", "$2"
			c.Tables = []relay.TableConfig{{Table: "a.outbox", Columns: outbox.DefaultColumns()},
				{Table: "b.outbox", Columns: outbox.DefaultColumns(), TopicTemplate: "b.{aggregate_type}"}}
		}, "table a.outbox: topic-replacement \"$2\": no group 2"},
		{"topic replacement alone", func(c *relay.Config) { c.TopicReplacement = "$1" }, "topic-replacement needs topic-regex"},
		{"topic replacement with braces", func(c *relay.Config) { c.TopicRegex, c.TopicReplacement = "(.*)", "{$1}" }, "braces"},
		{"no database", func(c *relay.Config) { c.DatabaseURL = "" }, "database url is required"},
		{"bad database url", func(c *relay.Config) { c.DatabaseURL = "postgres://x:s3cret@host:notaport/db" }, "database url"},
		{"primary url", func(c *relay.Config) { c.PrimaryURL = "postgres://relay@primary/app" }, ""},
		{"bad primary url", func(c *relay.Config) { c.PrimaryURL = "postgres://x@host:notaport/db" }, "primary url (--primary-url)"},
		{"primary url in poll mode", func(c *relay.Config) {
			c.Mode, c.OnPublish, c.PrimaryURL = relay.ModePoll, poller.Mark, "postgres://relay@primary/app"
		}, "primary-url is for streaming from a hot standby"},
		{"no sink", func(c *relay.Config) { c.Sink = nil }, "a sink is required"},
		{"bad slot", func(c *relay.Config) { c.Slot = "Bad-Slot" }, "slot"},
		{"messages off", func(c *relay.Config) { c.MessagePrefix = "" }, ""},
		{"messages prefix of the heartbeat", func(c *relay.Config) { c.MessagePrefix = "walrelay" }, "is the heartbeat's"},
		{"messages prefix with NUL", func(c *relay.Config) { c.MessagePrefix = "a\x00b" }, "NUL"},
		{"bad table", func(c *relay.Config) { c.Table = "a.b.c" }, "table"},
		{"zero status interval", func(c *relay.Config) { c.StatusInterval = 0 }, "status interval must be positive"},
		{"keepalive under status", func(c *relay.Config) { c.KeepaliveInterval = time.Millisecond }, "keepalive interval"},
		{"empty window", func(c *relay.Config) { c.MaxInFlightEvents = 0 }, "max in-flight events"},
		{"no broker probe", func(c *relay.Config) { c.BrokerProbeInterval = 0 }, ""},
		{"negative broker probe", func(c *relay.Config) { c.BrokerProbeInterval = -time.Second }, "broker probe interval must be 0"},
		{"broker probe too often", func(c *relay.Config) { c.BrokerProbeInterval = time.Millisecond }, "broker probe interval must be 0 (no probe) or at least 100ms"},
		{"bad mode", func(c *relay.Config) { c.Mode = "both" }, "mode"},
		{"bad on-publish", func(c *relay.Config) { c.OnPublish = "archive" }, "on-publish"},
		{"none in poll mode", func(c *relay.Config) { c.Mode, c.OnPublish = relay.ModePoll, poller.None }, "needs mode stream"},
		{"no attempts", func(c *relay.Config) { c.Retry.MaxAttempts = 0 }, "max attempts"},
		{"exactly-once", func(c *relay.Config) { c.Delivery = relay.ExactlyOnce }, ""},
		{"exactly-once in poll mode", func(c *relay.Config) { c.Delivery, c.Mode = relay.ExactlyOnce, relay.ModePoll }, "exactly-once needs"},
		{"exactly-once without transactions", func(c *relay.Config) { c.Delivery, c.Sink = relay.ExactlyOnce, plainSink{} }, "exactly-once needs"},
		{"bad delivery", func(c *relay.Config) { c.Delivery = "at-most-once" }, "delivery"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig(t)
			tc.tweak(&c)
			_, err := relay.New(c)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			case err != nil && strings.Contains(err.Error(), "s3cret"):
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}

func TestNewRejectsSharedRegistry(t *testing.T) {
	c := validConfig(t)
	c.Registry = prometheus.NewRegistry()
	if _, err := relay.New(c); err != nil {
		t.Fatal(err)
	}
	if _, err := relay.New(c); err == nil || !strings.Contains(err.Error(), "one relay per registry") {
		t.Fatalf("second relay on one registry: want an error, got %v", err)
	}
}
