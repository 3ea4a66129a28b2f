package settings

import "strings"

// A Group is a concern that a command's help lists its settings under.
type Group struct {
	Title string
	// names are the group's settings; prefix takes every setting that starts with it.
	names  []string
	prefix string
}

// Groups are the concerns in the order run's help lists them. Every setting is in
// one (TestEverySettingHasAGroup): a new setting joins one, or a broker's prefix.
var Groups = []Group{
	{Title: "Database and tables", names: []string{"database-url", "primary-url", "owner-url", "database-auth", "table", "publication",
		"slot", "slot-failover", "mode"}, prefix: "column-"},
	{Title: "Stream", names: []string{"on-publish", "delivery", "status-interval", "keepalive-interval", "heartbeat-interval",
		"progress-interval", "max-inflight-events", "max-inflight-bytes", "ack-timeout", "event-timeout", "shutdown-timeout",
		"start-paused", "messages-prefix", "progress-topic"}},
	{Title: "Retries, dead letters and polling", names: []string{"max-attempts", "retry-backoff-min", "retry-backoff-max",
		"poll-batch-size", "poll-interval", "poll-workers", "retention"}},
	{Title: "Records", names: []string{"sink", "record-headers", "record-timestamp", "key-converter", "key-converter-schemas-enable",
		"value-converter", "value-converter-schemas-enable", "expand-json-payload", "expand-json-payload-empty-arrays",
		"expand-json-payload-nulls", "tombstone-on-empty-payload"}, prefix: "topic-"},
	{Title: "Schema registry (key-converter, value-converter avro, protobuf, json-schema)",
		names: []string{"key-subject-name-strategy", "value-subject-name-strategy", "native-payload", "native-payload-framed", "native-payload-subject",
			"native-payload-id-header", "native-payload-message", "native-payload-message-header"}, prefix: "schema-registry-"},
	{Title: "Kafka (--sink kafka)", prefix: "kafka-"},
	{Title: "NATS JetStream (--sink nats)", prefix: "nats-"},
	{Title: "RabbitMQ (--sink rabbitmq)", prefix: "rabbitmq-"},
	{Title: "Redis Streams (--sink redis)", prefix: "redis-"},
	{Title: "Amazon SQS (--sink sqs)", prefix: "sqs-"},
	{Title: "Google Pub/Sub (--sink pubsub)", prefix: "pubsub-"},
	{Title: "HTTP (--sink http)", prefix: "http-"},
	{Title: "Operations", names: []string{"config", "database", "metrics-addr", "admin-url", "admin-token", "admin-hosts", "admin-trusted-proxies", "pprof",
		"log-level", "log-format", "stats-interval", "stall-timeout", "broker-probe-interval", "help"}},
}

// Has reports whether the setting or flag name is in the group.
func (g Group) Has(name string) bool {
	if g.prefix != "" && strings.HasPrefix(name, g.prefix) {
		return true
	}
	for _, n := range g.names {
		if n == name {
			return true
		}
	}
	return false
}

// GroupOf is the title of the group name is in; "" for none.
func GroupOf(name string) string {
	for _, g := range Groups {
		if g.Has(name) {
			return g.Title
		}
	}
	return ""
}
