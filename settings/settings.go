package settings

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/walrelay/walrelay/admin"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/schemaregistry"
	httpsink "github.com/walrelay/walrelay/sink/http"
	"github.com/walrelay/walrelay/sink/sinks"
)

// setting is one configuration value, known by the same name everywhere: --NAME on
// the command line, WALRELAY_NAME in the environment (upper case, - as _), NAME in
// the YAML file. Precedence: flags, then environment, then file, then defaults.
type setting struct {
	name  string
	usage string
	def   string
	set   func(string) error
	kind  string // kindString when empty; kindBool: --name alone means true; kindURL, kindURLs: shown only redacted
	// only: registered only by the subcommands that name it (a setting of one
	// subcommand, which a shared file or environment may still carry).
	only bool
}

// Settings holds what the subcommands configure and how each value is parsed: New
// gives the defaults, Register adds the settings a command takes as flags, Load
// applies the file, the environment and the flags over them, and CheckedConfig or
// RelayConfig validate them into the relay's configuration.
type Settings struct {
	// Relay and Sinks are the relay's and the sink's configuration as loaded.
	Relay relay.Config
	Sinks sinks.Config
	// Admin is the HTTP listener's: metrics-addr, admin-token, admin-hosts, pprof.
	Admin admin.Options
	// AdminURL is admin-url: the relay's HTTP address for status, pause, resume
	// and replay (empty: the relay's metrics-addr).
	AdminURL string
	// OwnerURL is owner-url: the URL migrate connects with, as the tables' owner
	// (empty: the relay's database-url).
	OwnerURL string
	// DatabaseAuth is database-auth: AuthPassword or AuthAWSIAM.
	DatabaseAuth string
	// Authenticate, when set, is called after Load and after each databases entry
	// is applied: it gives the configuration the credentials DatabaseAuth and the
	// Kafka SASL mechanism ask for (the binary signs AWS tokens; this package
	// signs none). Databases passes it on to each entry's settings.
	Authenticate func(*Settings) error
	// Registry is the schema registry's client configuration (schema-registry-*),
	// used when a converter is avro, protobuf or json-schema.
	Registry schemaregistry.Config
	// Warnings are what Load found odd but not wrong (an unknown WALRELAY_*
	// variable); the command reports them (Warn).
	Warnings []string

	logLevel  string
	logFormat string
	// keyStrategy and valueStrategy are the subject name strategies.
	keyStrategy, valueStrategy record.SubjectStrategy
	all                        []setting
	// databases are the file's databases list (databases.go), read by the
	// subcommands that take --database; entry is the name of the one these
	// settings are, and where the place of its entry in the file, while
	// Databases loads them.
	databases []databaseEntry
	entry     string
	where     string
}

// --database-auth values.
const (
	AuthPassword = "password"
	AuthAWSIAM   = "aws-iam"
)

// New returns the defaults of every setting.
func New() *Settings {
	s := &Settings{Relay: relay.DefaultConfig(), Sinks: sinks.DefaultConfig(), logLevel: "info", logFormat: "json", DatabaseAuth: AuthPassword,
		Registry: schemaregistry.DefaultConfig()}
	s.Admin.Addr = "127.0.0.1:9731" // loopback: exposing metrics is the operator's choice
	c, b := &s.Relay, &s.Sinks
	s.all = []setting{
		urlSetting("database-url", "PostgreSQL URL, e.g. postgres://relay@db:5432/app (role with REPLICATION)", &c.DatabaseURL),
		urlSetting("primary-url", "the primary's URL when database-url is a hot standby (PostgreSQL 16+): the slot is streamed on the standby, "+
			"walrelay's bookkeeping is written to the primary; empty: the read-write server of a database-url that names several", &c.PrimaryURL),
		{name: "database-auth", usage: "password (the URL's, or PGPASSWORD/.pgpass), or aws-iam (an RDS/Aurora IAM token for the URL's user, " +
			"signed with the standard AWS credentials before each connection; needs AWS_REGION or a configured region)",
			def: AuthPassword, set: func(v string) error { s.DatabaseAuth = v; return nil }},
		{name: "sink", usage: "broker: kafka, nats (JetStream), rabbitmq, redis (streams), sqs, pubsub (Google Pub/Sub) or http (a POST per event, signed webhooks)", def: string(b.Kind),
			set: func(v string) error { b.Kind = sinks.Kind(v); return nil }},
		{name: "kafka-brokers", usage: "Kafka brokers, comma-separated host:port", kind: kindList,
			set: func(v string) error { b.Kafka.Brokers = splitList(v); return nil }},
		{name: "kafka-tls", usage: "connect to Kafka over TLS", def: "false", kind: kindBool,
			set: func(v string) error { return parseBool(v, &b.Kafka.Security.TLS) }},
		str("kafka-tls-ca-file", "PEM file of the CA that signed the brokers' certificates (default: system roots)", &b.Kafka.Security.CAFile),
		str("kafka-tls-cert-file", "PEM client certificate, for brokers that require one", &b.Kafka.Security.CertFile),
		str("kafka-tls-key-file", "PEM key of the client certificate", &b.Kafka.Security.KeyFile),
		str("kafka-sasl-mechanism", "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, or AWS_MSK_IAM (Amazon MSK IAM, signed with the standard AWS credentials; "+
			"use with --kafka-tls) (empty: no SASL)", &b.Kafka.Security.SASLMechanism),
		str("kafka-sasl-user", "SASL user", &b.Kafka.Security.SASLUser),
		{name: "kafka-sasl-password", usage: "SASL password (prefer the environment or the file over a flag)",
			set: func(v string) error { b.Kafka.Security.SASLPassword = v; return nil }},
		{name: "nats-url", usage: "NATS server(s) (--sink nats)", def: b.NATS.URL, kind: kindURLs,
			set: func(v string) error { b.NATS.URL = v; return nil }},
		str("nats-stream", "JetStream stream that captures the subjects (--topic-template)", &b.NATS.Stream),
		{name: "nats-create-stream", usage: "create the stream when missing", def: strconv.FormatBool(b.NATS.CreateStream), kind: kindBool,
			set: func(v string) error { return parseBool(v, &b.NATS.CreateStream) }},
		urlSetting("rabbitmq-url", "AMQP URL (--sink rabbitmq)", &b.RabbitMQ.URL),
		str("rabbitmq-exchange-template", "exchange; {aggregate_type} and {event_type} are replaced", &b.RabbitMQ.ExchangeTemplate),
		str("rabbitmq-routing-key-template", "routing key; {aggregate_type} and {event_type} are replaced", &b.RabbitMQ.RoutingKeyTemplate),
		{name: "rabbitmq-declare-exchange", usage: "declare exchanges as durable topic exchanges when first used", def: "false", kind: kindBool,
			set: func(v string) error { return parseBool(v, &b.RabbitMQ.DeclareExchange) }},
		urlSetting("redis-url", "Redis URL (--sink redis); streams are named by --topic-template", &b.Redis.URL),
		{name: "redis-max-len", usage: "trim each stream to about this many entries (0: keep all)", def: "0", kind: kindInt,
			set: func(v string) error { return parseInto(v, &b.Redis.MaxLen) }},
		dur("redis-dedup-window", "how long an event id is remembered per stream to drop redeliveries", &b.Redis.DedupWindow),
		str("sqs-region", "AWS region of the SQS queues (--sink sqs; empty: AWS_REGION or the AWS config file); queues are named by --topic-template", &b.SQS.Region),
		urlSetting("sqs-endpoint", "SQS endpoint URL, e.g. a VPC endpoint or a local server (empty: the region's)", &b.SQS.Endpoint),
		str("pubsub-project", "Google Cloud project of the topics (--sink pubsub); topics are named by --topic-template", &b.PubSub.Project),
		urlSetting("pubsub-endpoint", "Pub/Sub endpoint host:port, e.g. a locational us-east1-pubsub.googleapis.com:443 (empty: the global one)", &b.PubSub.Endpoint),
		urlSetting("pubsub-emulator-host", "host:port of a Pub/Sub emulator or fake, in plaintext without credentials (empty: Google's service)", &b.PubSub.EmulatorHost),
		str("pubsub-credentials-file", "service account key JSON (empty: Application Default Credentials, e.g. GOOGLE_APPLICATION_CREDENTIALS)", &b.PubSub.CredentialsFile),
		urlSetting("http-url", "where each event is POSTed (--sink http), http:// or https://; its path and query may use {aggregate_type} and {event_type}", &b.HTTP.URL),
		dur("http-timeout", "longest wait for the endpoint's answer to one request", &b.HTTP.Timeout),
		num("http-max-connections", "requests under way at once, each for a different aggregate (one at a time per aggregate)", &b.HTTP.MaxConnections),
		str("http-tls-ca-file", "PEM file of the CA that signed the endpoint's certificate (default: system roots)", &b.HTTP.CAFile),
		str("http-tls-cert-file", "PEM client certificate, for endpoints that require one", &b.HTTP.CertFile),
		str("http-tls-key-file", "PEM key of the client certificate", &b.HTTP.KeyFile),
		{name: "http-headers", usage: "headers sent with every request, comma-separated Name=env:VARIABLE or Name=file:PATH " +
			"(e.g. Authorization=file:/run/secrets/token); values are read from there, never written in the configuration, never logged", kind: kindList,
			set: func(v string) error { return setHTTPHeaders(v, &b.HTTP.Headers) }},
		{name: "http-signing-secrets", usage: "Standard Webhooks secrets (whsec_...), comma-separated env:VARIABLE or file:PATH (a file may hold " +
			"several, one a line); each request is signed with every one, for a key rotation (empty: unsigned)", kind: kindList,
			set: func(v string) error { b.HTTP.SigningSecrets = splitList(v); return nil }},
		str("table", "outbox table, optionally schema-qualified", &c.Table),
		str("column-id", "the table's event id column (uuid, text or bigint): the id header, for deduplication", &c.Columns.ID),
		str("column-aggregate-type", "the table's aggregate type column (topic template's {aggregate_type})", &c.Columns.AggregateType),
		str("column-aggregate-id", "the table's aggregate id column: the record key, so one aggregate keeps its order", &c.Columns.AggregateID),
		str("column-event-type", "the table's event type column (topic template's {event_type}, the event_type header; empty: none)", &c.Columns.EventType),
		str("column-payload", "the table's payload column (jsonb, json, text or bytea): the record value", &c.Columns.Payload),
		str("column-created-at", "the table's creation time column (timestamptz or timestamp; empty: none, the commit time is used)", &c.Columns.CreatedAt),
		{name: "column-headers", usage: "columns published as record headers, comma-separated column or column:header (e.g. tenant_id:tenant); NULL leaves the header out", kind: kindList,
			set: func(v string) error { return setHeaderColumns(v, &c.Columns.Headers) }},
		{name: "column-envelope", usage: "columns placed in the record value beside the payload, comma-separated column or column:field " +
			"(Debezium's col:envelope:alias): the value becomes {\"payload\":…,\"field\":…} with value-converter json, Struct{payload=…,field=…} with string (every sink)", kind: kindList,
			set: func(v string) error { return setHeaderColumns(v, &c.Columns.Envelope) }},
		str("column-partition", "column whose value is the Kafka partition of the record (empty: none; NULL: the key hash decides)", &c.Columns.Partition),
		str("column-trace", "trace context column (W3C traceparent or Debezium's tracingspancontext), read only where the table has it; empty: none", &c.Columns.Trace),
		str("slot", "logical replication slot name", &c.Slot),
		str("publication", "publication name (created for the table when missing)", &c.Publication),
		{name: "slot-failover", usage: "create the slot as a failover slot, so a promoted standby has it (PostgreSQL 17+)",
			def: strconv.FormatBool(c.SlotFailover), kind: kindBool, set: func(v string) error { return parseBool(v, &c.SlotFailover) }},
		str("topic-template", "where events go: the Kafka topic, NATS subject or Redis stream; {aggregate_type} and {event_type} are replaced "+
			"(RabbitMQ: --rabbitmq-exchange-template)", &b.TopicTemplate),
		str("topic-regex", "route by a regular expression on the aggregate type instead of topic-template, as Debezium's route.topic.regex: "+
			"a whole match becomes topic-replacement, any other value is its own topic", &c.TopicRegex),
		str("topic-replacement", "the topic a topic-regex match becomes, as Debezium's route.topic.replacement ($1, ${name}; \\$ for a dollar)", &c.TopicReplacement),
		dur("status-interval", "how soon acked events are confirmed to PostgreSQL", &c.StatusInterval),
		dur("keepalive-interval", "longest gap between status updates (lowered to wal_sender_timeout/3)", &c.KeepaliveInterval),
		dur("shutdown-timeout", "how long a stop waits for in-flight acks", &c.ShutdownTimeout),
		num("max-inflight-events", "events handed to the broker and not yet acked, at most", &c.MaxInFlightEvents),
		size("max-inflight-bytes", "bytes handed to the broker and not yet acked, at most", &c.MaxInFlightBytes),
		{name: "delivery", usage: "at-least-once, or exactly-once (Kafka transactions; read_committed consumers see each event once)",
			def: string(c.Delivery), set: func(v string) error { c.Delivery = relay.Delivery(v); return nil }},
		str("progress-topic", "compacted Kafka topic where exactly-once delivery keeps the stream position", &b.Kafka.ProgressTopic),
		{name: "mode", usage: "stream (logical replication) or poll (FOR UPDATE SKIP LOCKED, no replication needed)",
			def: string(c.Mode), set: func(v string) error { c.Mode = relay.Mode(v); return nil }},
		{name: "on-publish", usage: "after an ack: progress (a published horizon per progress interval, no per-row write; " +
			"stream mode), mark (set processed_at), delete, or none (the application deletes rows); " +
			"empty: progress in stream mode, mark in poll mode",
			def: string(c.OnPublish), set: func(v string) error { c.OnPublish = poller.OnPublish(v); return nil }},
		dur("progress-interval", "how often on-publish progress records its published horizon, and a stream its confirmed position (at most)", &c.ProgressInterval),
		num("max-attempts", "failed publishes before a row is a dead letter", &c.Retry.MaxAttempts),
		dur("retry-backoff-min", "first wait before retrying a failed event (doubles each attempt)", &c.Retry.BackoffMin),
		dur("retry-backoff-max", "longest wait between retries", &c.Retry.BackoffMax),
		dur("ack-timeout", "how long the oldest event in flight may wait for the broker's ack before the relay warns, /readyz answers 503 "+
			"and walrelay_broker_up is 0 (0: not watched)", &c.AckTimeout),
		dur("broker-probe-interval", "how often the relay asks the broker whether it answers while no event is in flight, so that a broker lost "+
			"while the outbox is idle is seen within ack-timeout plus this interval; standbys probe too (0: no probe)", &c.BrokerProbeInterval),
		dur("event-timeout", "deprecated, use --ack-timeout to learn of a broker that stops acknowledging: Kafka's per-record delivery timeout, "+
			"checked only when the producer retries a record, after which the session restarts (0: never); also bounds the poller's wait for acks", &b.Kafka.EventTimeout),
		size("kafka-max-message-bytes", "largest record batch the producer builds (0: franz-go default, ~1MB)", &b.Kafka.MaxMessageBytes),
		str("kafka-compression", "record batch compression: none, snappy, lz4, zstd or gzip", &b.Kafka.Compression),
		{name: "key-converter", usage: "how the record key is written, as Kafka Connect's key.converter: string (the aggregate id as it is), " +
			"json (JsonConverter: a JSON string), bytearray, or avro, protobuf or json-schema (Confluent's converters, through schema-registry-url)", def: "string",
			set: func(v string) error { return setConverter(v, &b.Format.KeyConverter) }},
		{name: "key-converter-schemas-enable", usage: "json key converter: write {\"schema\":…,\"payload\":…} (JsonConverter's schemas.enable)",
			def: "false", kind: kindBool, set: func(v string) error { return parseBool(v, &b.Format.KeySchemas) }},
		{name: "value-converter", usage: "how the record value is written, as Kafka Connect's value.converter: string (the payload as it is), " +
			"json (JsonConverter: text and json payloads as a JSON string, bytea as base64, NULL as null), bytearray, " +
			"or avro, protobuf or json-schema (Confluent's converters: schema registry framing, through schema-registry-url)", def: "string",
			set: func(v string) error { return setConverter(v, &b.Format.ValueConverter) }},
		{name: "value-converter-schemas-enable", usage: "json value converter: write {\"schema\":…,\"payload\":…} (JsonConverter's schemas.enable)",
			def: "false", kind: kindBool, set: func(v string) error { return parseBool(v, &b.Format.ValueSchemas) }},
		str("topic-prefix", "the Debezium connector's topic.prefix: column-envelope with value-converter-schemas-enable names the value's "+
			"struct schema after it, topic-prefix.schema.table.aggregate_type.Value, as Debezium's outbox router does", &b.Format.TopicPrefix),
		{name: "tombstone-on-empty-payload", usage: "publish a NULL, empty or blank payload as a tombstone whatever the converter " +
			"(Debezium's route.tombstone.on.empty.payload); otherwise only the string and bytearray converters make NULL a tombstone",
			def: "false", kind: kindBool, set: func(v string) error { return parseBool(v, &b.Format.TombstoneOnEmpty) }},
		{name: "expand-json-payload", usage: "value-converter string or json: write a payload that starts with { as the struct " +
			"Debezium's table.expand.json.payload parses it into (null fields and empty arrays dropped, numbers as Java writes them); " +
			"a payload that does not parse stays as it is",
			def: "false", kind: kindBool, set: func(v string) error { return parseBool(v, &b.Format.ExpandJSON.Enabled) }},
		{name: "expand-json-payload-nulls", usage: "expand-json-payload: null fields are dropped (ignore) or kept as null (optional_bytes), " +
			"Debezium's table.json.payload.null.behavior", def: "ignore",
			set: func(v string) error {
				return setExpandBehaviour(v, "optional_bytes", &b.Format.ExpandJSON.KeepNulls)
			}},
		{name: "expand-json-payload-empty-arrays", usage: "expand-json-payload: empty arrays are dropped (ignore) or kept (optional_string), " +
			"Debezium's table.json.payload.empty.array.behavior", def: "ignore",
			set: func(v string) error {
				return setExpandBehaviour(v, "optional_string", &b.Format.ExpandJSON.KeepEmptyArrays)
			}},
		{name: "schema-registry-url", usage: "Confluent-compatible schema registry URL(s), comma-separated, for key-converter and value-converter " +
			"avro, protobuf and json-schema", kind: kindURLs,
			set: func(v string) error { s.Registry.URLs = schemaregistry.ParseURLs(v); return nil }},
		{name: "schema-registry-basic-auth", usage: "user:password for the schema registry (Confluent's basic.auth.user.info; " +
			"prefer the environment or the file over a flag)",
			set: func(v string) error { s.Registry.BasicAuth = v; return nil }},
		{name: "schema-registry-token", usage: "bearer token for the schema registry (prefer the environment or the file over a flag)",
			set: func(v string) error { s.Registry.Token = v; return nil }},
		str("schema-registry-tls-ca-file", "PEM file of the CA that signed the schema registry's certificate (default: system roots)", &s.Registry.CAFile),
		str("schema-registry-tls-cert-file", "PEM client certificate, for a schema registry that requires one", &s.Registry.CertFile),
		str("schema-registry-tls-key-file", "PEM key of the schema registry client certificate", &s.Registry.KeyFile),
		{name: "schema-registry-auto-register", usage: "register a schema the subject does not have yet (Confluent's auto.register.schemas); " +
			"false: look it up, and dead-letter the events whose schema is not registered", def: "true", kind: kindBool,
			set: func(v string) error { return parseBool(v, &s.Registry.AutoRegister) }},
		{name: "schema-registry-use-latest-version", usage: "write with the id of the subject's latest version (use.latest.version; " +
			"needs schema-registry-auto-register false)", def: "false", kind: kindBool,
			set: func(v string) error { return parseBool(v, &s.Registry.UseLatestVersion) }},
		{name: "schema-registry-normalize", usage: "ask the registry to normalize schemas when registering and looking up (normalize.schemas)",
			def: "false", kind: kindBool, set: func(v string) error { return parseBool(v, &s.Registry.Normalize) }},
		{name: "key-subject-name-strategy", usage: "subject of the key schema: topic (<topic>-key), record (the schema's record name) " +
			"or topic-record (<topic>-<record name>); the record-based ones need a schema with a record name", def: "topic",
			set: func(v string) error { return setStrategy(v, &s.keyStrategy) }},
		{name: "value-subject-name-strategy", usage: "subject of the value schema: topic (<topic>-value), record or topic-record; " +
			"the record-based ones need a schema with a record name (column-envelope's struct)", def: "topic",
			set: func(v string) error { return setStrategy(v, &s.valueStrategy) }},
		{name: "native-payload", usage: "the bytea payload already holds value-converter's encoding (avro or protobuf), written by the " +
			"service: walrelay checks it against the registry's schema and frames it, never re-encodes it; a payload already framed " +
			"with that schema's id passes as it is", def: "false", kind: kindBool,
			set: func(v string) error { return parseBool(v, &b.Format.Native.Enabled) }},
		{name: "native-payload-framed", usage: "native-payload: whether the service frames payloads itself with a registry serializer: " +
			"detect (a payload beginning with 0 and the schema's id, the rest well formed, passes as it is; one that reads both ways " +
			"is a dead letter), never (frame every payload) or always (pass every payload as it is, a dead letter unless framed with " +
			"the schema's id)", def: "detect",
			set: func(v string) (err error) { b.Format.Native.Framed, err = record.ParseFraming(v); return err }},
		str("native-payload-subject", "native-payload: the subject whose latest version is the payload's schema, a template with "+
			"{topic}, {event_type} and {aggregate_type} (default {topic}-value)", &b.Format.Native.Subject),
		str("native-payload-id-header", "native-payload: a header placed from a column (column-headers) that holds the schema's id; "+
			"the schema is then the one with that id, and native-payload-subject is not used", &b.Format.Native.IDHeader),
		str("native-payload-message", "native-payload with protobuf: the message's full name, a template with {event_type} and "+
			"{aggregate_type} (default: the schema's first message)", &b.Format.Native.Message),
		str("native-payload-message-header", "native-payload with protobuf: a header placed from a column (column-headers) that holds "+
			"the message's full name; it wins over native-payload-message", &b.Format.Native.MessageHeader),
		{name: "record-headers", usage: "walrelay's own record headers: walrelay (id, event_type, aggregate_type, aggregate_id, created_at) " +
			"or debezium (id alone, as Debezium's outbox router); column-headers follow either", def: "walrelay",
			set: func(v string) error { return setRecordHeaders(v, &b.Format.IDHeaderOnly) }},
		{name: "record-timestamp", usage: "the Kafka record timestamp: publish (the time walrelay publishes) or created-at " +
			"(column-created-at, Debezium's table.field.event.timestamp; event-timeout then does not apply)", def: "publish",
			set: func(v string) error { return setRecordTimestamp(v, &b.Format.EventTimestamp) }},
		num("poll-batch-size", "rows locked and published per poll", &c.PollBatchSize),
		num("poll-workers", "poll transactions under way at once per table in poll mode", &c.PollWorkers),
		dur("poll-interval", "poller's fallback interval (NOTIFY wakes it sooner in poll mode)", &c.PollInterval),
		dur("retention", "how long published rows are kept (0: forever); marked ones by processed_at, the progress mode's by created_at and at most 3·2^30 xids of age", &c.Retention),
		str("metrics-addr", "serve /metrics, /healthz and /readyz here (empty: off)", &s.Admin.Addr),
		{name: "admin-url", usage: "status, pause, resume and replay: the relay's HTTP address, e.g. http://walrelay:9731, where status asks /readyz " +
			"and replay whether it is paused (empty: the relay's metrics-addr, where a relay that does not answer is no problem)", only: true, kind: kindURL,
			set: func(v string) error { s.AdminURL = v; return nil }},
		{name: "owner-url", usage: "migrate: the URL it connects with, as the outbox tables' owner, where database-url is the relay's " +
			"role (empty: database-url); a databases entry may set its own", only: true, kind: kindURL,
			set: func(v string) error { s.OwnerURL = v; return nil }},
		{name: "start-paused", usage: "start paused: hold the slot, read and publish nothing until resumed (walrelay resume, POST /resume)",
			def: "false", kind: kindBool, set: func(v string) error { return parseBool(v, &c.StartPaused) }},
		str("admin-token", "bearer token the admin API and the profiler on the metrics address ask for (prefer the environment or the file); "+
			"required for them on a non-loopback address; without one on loopback every local process may call them", &s.Admin.Token),
		{name: "admin-hosts", usage: "names the admin API and the profiler answer requests to, comma-separated, besides loopback addresses, " +
			"localhost and the address the relay is reached at (e.g. walrelay,walrelay.ops.svc): a request to another Host is refused, " +
			"which keeps web pages out (DNS rebinding)", kind: kindList,
			set: func(v string) error { s.Admin.Hosts = splitList(v); return nil }},
		{name: "admin-trusted-proxies", usage: "addresses or CIDR networks of reverse proxies in front of the metrics address, comma-separated: " +
			"their X-Forwarded-For names the address an admin action is logged with (empty: the peer's address, X-Forwarded-For ignored)", kind: kindList,
			set: func(v string) error { s.Admin.TrustedProxies = splitList(v); return nil }},
		{name: "pprof", usage: "also serve Go's profiler under /debug/pprof/ on the metrics address, behind the admin API's checks and token",
			def: "false", kind: kindBool, set: func(v string) error { return parseBool(v, &s.Admin.Pprof) }},
		dur("stats-interval", "how often slot health and outbox counts are read for metrics", &c.StatsInterval),
		dur("stall-timeout", "lag growing with no confirmed progress for this long marks the relay stalled", &c.StallTimeout),
		dur("heartbeat-interval", "write a logical message this often while idle so the slot advances (0: off)", &c.HeartbeatInterval),
		str("messages-prefix", "publish transactional logical messages with this prefix as events (outbox.Emit; PostgreSQL 14+; empty: off)", &c.MessagePrefix),
		str("log-level", "debug, info, warn or error", &s.logLevel),
		str("log-format", "json or text", &s.logFormat),
	}
	s.noteURLSettings()
	return s
}

func setHeaderColumns(v string, p *[]outbox.HeaderColumn) error {
	hs, err := outbox.ParseHeaderColumns(v)
	if err != nil {
		return err
	}
	*p = hs
	return nil
}

// setHTTPHeaders parses --http-headers: Name=env:VARIABLE or Name=file:PATH.
func setHTTPHeaders(v string, p *[]httpsink.Header) error {
	var hs []httpsink.Header
	for _, item := range splitList(v) {
		h, err := httpsink.ParseHeader(item)
		if err != nil {
			return err
		}
		hs = append(hs, h)
	}
	*p = hs
	return nil
}

func str(name, usage string, p *string) setting {
	return setting{name: name, usage: usage, def: *p, set: func(v string) error { *p = v; return nil }}
}

// urlSetting is a string setting of kind URL: shown only redacted.
func urlSetting(name, usage string, p *string) setting {
	st := str(name, usage, p)
	st.kind = kindURL
	return st
}

func dur(name, usage string, p *time.Duration) setting {
	return setting{name: name, usage: usage, def: p.String(), kind: kindDuration, set: func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("want a duration like 100ms or 10s, got %q", v)
		}
		*p = d
		return nil
	}}
}

func num(name, usage string, p *int) setting {
	return setting{name: name, usage: usage, def: strconv.Itoa(*p), kind: kindInt, set: func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("want a whole number, got %q", v)
		}
		*p = n
		return nil
	}}
}

// size is a bytes setting: a number of bytes, or one with a unit (64MiB).
func size[T int | int64](name, usage string, p *T) setting {
	return setting{name: name, usage: usage, def: formatBytes(int64(*p)), kind: kindBytes, set: func(v string) error {
		n, err := parseBytes(v)
		if err != nil {
			return err
		}
		if int64(T(n)) != n {
			return fmt.Errorf("%q is too large", v)
		}
		*p = T(n)
		return nil
	}}
}

func parseInto(v string, p *int64) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return fmt.Errorf("want a whole number, got %q", v)
	}
	*p = n
	return nil
}

func parseBool(v string, p *bool) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("want true or false, got %q", v)
	}
	*p = b
	return nil
}

func setConverter(v string, p *record.Converter) error {
	c, err := record.ParseConverter(v)
	if err != nil {
		return err
	}
	*p = c
	return nil
}

func setStrategy(v string, p *record.SubjectStrategy) error {
	st, err := record.ParseSubjectStrategy(v)
	if err != nil {
		return err
	}
	*p = st
	return nil
}

func setRecordHeaders(v string, idOnly *bool) error {
	switch v {
	case "walrelay":
		*idOnly = false
	case "debezium":
		*idOnly = true
	default:
		return fmt.Errorf("want walrelay or debezium, got %q", v)
	}
	return nil
}

func setRecordTimestamp(v string, eventTime *bool) error {
	switch v {
	case "publish":
		*eventTime = false
	case "created-at":
		*eventTime = true
	default:
		return fmt.Errorf("want publish or created-at, got %q", v)
	}
	return nil
}

// setExpandBehaviour reads one of the router's JSON expansion behaviours: ignore,
// or keep, the option's own name for keeping.
func setExpandBehaviour(v, keep string, kept *bool) error {
	switch v {
	case "ignore":
		*kept = false
	case keep:
		*kept = true
	default:
		return fmt.Errorf("want ignore or %s, got %q", keep, v)
	}
	return nil
}

func splitList(v string) []string {
	var out []string
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
