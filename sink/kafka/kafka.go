// Package kafka is the Kafka sink, built on franz-go: an idempotent producer with
// acks=all, so a record is acknowledged only when every in-sync replica has it, and
// retries keep per-partition order.
//
// Records are what package record makes of each event (Config.Format): the key, the
// value (a null value, a tombstone, where the format says so), the timestamp, and
// the headers id, event_type, aggregate_type, aggregate_id and created_at (RFC
// 3339), then the headers taken from columns (outbox.Event.Headers). The topic comes
// from a template. Records are partitioned by Kafka's default partitioner on the
// key's bytes as written, so a Debezium topic keeps each key on its partition. An
// event with a partition (outbox.Event.Partition, from the table's partition column)
// goes to that partition. A partition that is not a number or not one of the
// topic's is an error of that event (sink.EventError).
//
// Publish never waits for room in franz-go's buffer, whoever else publishes through
// the sink: records beyond the sink's budget wait in it, in order (feed.go).
package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/outbox"
	rec "github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/sink"
)

// DefaultTopicTemplate is Debezium's outbox router default, so consumers can move over.
const DefaultTopicTemplate = "outbox.event.{aggregate_type}"

// Config of the Kafka sink.
type Config struct {
	Brokers []string
	// TopicTemplate may use {aggregate_type} and {event_type}.
	TopicTemplate string
	// Format is how an event becomes a record's key, value and timestamp; the zero
	// Format is walrelay's own.
	Format rec.Format
	// MaxBufferedEvents and MaxBufferedBytes bound the records the sink has handed to
	// franz-go and not had an answer for. Publish never waits for room: records
	// beyond them wait in the sink, in order, until acknowledgements make room
	// (feed.go). Keep them above the relay's in-flight window, so that the stream's
	// own records go straight to franz-go.
	MaxBufferedEvents int
	MaxBufferedBytes  int
	// MaxMessageBytes is the largest record batch the producer builds; keep it at or
	// below the brokers' message.max.bytes. 0: franz-go's default (about 1 MB).
	MaxMessageBytes int
	// Compression of record batches: none, snappy, lz4, zstd or gzip; empty is
	// DefaultCompression.
	Compression string
	// EventTimeout is how long one record may keep failing with retriable errors
	// before franz-go gives up on it and on the rest of its partition. That is an
	// outage of the partition, not a failure of the event: the error is a plain
	// one, whatever other partitions do meanwhile. 0: retry for ever, as also with
	// Format.EventTimestamp (franz-go counts the timeout from the record's
	// timestamp); the relay's stall detection still reports a partition that stays down.
	EventTimeout time.Duration
	// ProgressTopic is the compacted topic where exactly-once delivery keeps stream
	// positions (see OpenStream).
	ProgressTopic string
	// Security: TLS and SASL.
	Security Security
	// Opts are passed to franz-go after walrelay's own, so they win.
	Opts []kgo.Opt
}

// withDefaults fills in zero fields. The buffers default above the relay's default
// in-flight window (10,000 events, 64 MiB), so that records rarely wait in the sink.
func (c Config) withDefaults() Config {
	if c.TopicTemplate == "" {
		c.TopicTemplate = DefaultTopicTemplate
	}
	if c.Compression == "" {
		c.Compression = DefaultCompression
	}
	if c.ProgressTopic == "" {
		c.ProgressTopic = DefaultProgressTopic
	}
	if c.MaxBufferedEvents == 0 {
		c.MaxBufferedEvents = 1 << 15
	}
	if c.MaxBufferedBytes == 0 {
		c.MaxBufferedBytes = 256 << 20
	}
	return c
}

// Validate checks the configuration without connecting; zero fields take their
// defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("kafka brokers are required (--kafka-brokers or WALRELAY_KAFKA_BROKERS, comma-separated host:port)"))
	}
	for _, b := range c.Brokers {
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			errs = append(errs, fmt.Errorf("kafka broker %q is not host:port", b))
		}
	}
	if _, err := sink.ParseTemplate(c.TopicTemplate); err != nil {
		errs = append(errs, err)
	}
	if c.MaxMessageBytes < 0 {
		errs = append(errs, errors.New("max message bytes must not be negative"))
	}
	if c.EventTimeout != 0 && c.EventTimeout < time.Second {
		errs = append(errs, fmt.Errorf("event timeout must be 0 (never) or at least 1s, got %s", c.EventTimeout))
	}
	errs = append(errs, CheckCompression(c.Compression), c.Security.Validate(), c.Format.Validate())
	return errors.Join(errs...)
}

// DefaultProgressTopic is where exactly-once delivery keeps stream positions.
const DefaultProgressTopic = "walrelay.progress"

// Sink publishes to Kafka.
type Sink struct {
	client    *kgo.Client
	feed      *feed  // what Publish produces through: it never waits for room (feed.go)
	cfg       Config // for the exactly-once producer, which shares the client options
	topic     sink.Template
	format    *rec.Format
	topics    topicCache
	promiseFn func(*kgo.Record, error) // s.promise, bound once: a method value allocates
	errs      *brokerErrors
	purging   sync.Map // topics being forgotten after UNKNOWN_TOPIC_ID (topicid.go)
}

// New creates the client; it connects lazily. Zero fields take their defaults.
func New(cfg Config) (*Sink, error) {
	cfg = cfg.withDefaults()
	tmpl, err := sink.ParseTemplate(cfg.TopicTemplate)
	if err != nil {
		return nil, err
	}
	opts, err := clientOpts(cfg)
	if err != nil {
		return nil, err
	}
	errs := &brokerErrors{}
	client, err := kgo.NewClient(append(opts, kgo.WithHooks(errs))...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	s := &Sink{client: client, cfg: cfg, topic: tmpl, format: &cfg.Format, errs: errs}
	s.promiseFn = s.promise
	s.feed = newFeed(client, s.promiseFn, cfg.MaxBufferedEvents, int64(cfg.MaxBufferedBytes))
	return s, nil
}

// clientOpts are the franz-go options of both producers, the plain and the
// transactional one, so the two cannot drift; the transactional one adds its id and
// transaction timeout.
func clientOpts(cfg Config) ([]kgo.Opt, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("kafka: no brokers configured")
	}
	comp, err := compression(cfg.Compression)
	if err != nil {
		return nil, err
	}
	secOpts, err := cfg.Security.Opts()
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.RecordPartitioner(partitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.AllowAutoTopicCreation(),
		kgo.ClientID("walrelay"),
		// A produce request is a wake-up cycle of several goroutines; at moderate
		// rates the relay's CPU goes with the cycles, not the records. 3ms instead of
		// 1ms cut produce writes per event by about 40% and relay CPU per event by
		// 10-15% at 1,000 and 5,000 events/s, for about 2.5ms more commit to consume
		// (docs/performance.md, "Moderate rates"); franz-go's 10ms cost 5ms at p50.
		kgo.ProducerLinger(3 * time.Millisecond),
		kgo.Dialer(dial),
		comp,
		// KIP-714's metrics push, to a broker that subscribes, compresses each push
		// with franz-go's own lz4 writer, whose 4 MiB blocks cost 8 MiB of heap per
		// push: the first one lands as a drain starts and set the heap's peak
		// (docs/performance.md, "Memory"). The relay's /metrics carry its producer's
		// figures instead.
		kgo.DisableClientMetrics(),
	}
	opts = append(opts, bufferOpts(cfg.MaxBufferedEvents)...)
	if cfg.MaxMessageBytes > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(int32(cfg.MaxMessageBytes)))
	}
	// franz-go measures a record's delivery timeout from its timestamp: a record
	// stamped with its event's creation time would time out before it is sent.
	if cfg.EventTimeout > 0 && !cfg.Format.EventTimestamp {
		opts = append(opts, kgo.RecordDeliveryTimeout(cfg.EventTimeout))
	}
	opts = append(opts, secOpts...)
	return append(opts, cfg.Opts...), nil
}

// Publish produces one record; see sink.Sink. It never waits for room in the
// client's buffer (feed.go), whoever else produces through the sink meanwhile.
func (s *Sink) Publish(e *outbox.Event, done sink.Done) {
	s.feed.produce(newRecord(s.topic, &s.topics, s.format, e, done))
}

// record is a kgo.Record with what the promise needs, inside a narrowRecord or a
// wideRecord that has room for its headers, so that an event costs no allocation
// here once records are recycled. Record must stay the first field: the promise gets
// the *kgo.Record back and finds its record from it. Every byte of it is held per
// event in flight, a full window of them at a drain's peak (docs/performance.md,
// "Memory: where the drain's resident set goes").
type record struct {
	kgo.Record
	done    sink.Done
	size    int64 // what the feed counts of it (userSize)
	created [rec.CreatedLen]byte
}

// narrowRecord is the record of an event without headers of its own, most events:
// room for walrelay's headers alone.
type narrowRecord struct {
	record
	headers [ownHeaders]kgo.RecordHeader
}

// wideRecord is the record of an event with headers of its own (a trace context, a
// column placed as a header): room for four of them; more are appended.
type wideRecord struct {
	record
	headers [ownHeaders + 4]kgo.RecordHeader
}

// ownHeaders are the headers every record carries before the event's own.
const ownHeaders = rec.OwnHeaders

// narrowRecords and wideRecords recycle records: franz-go is done with a record once
// its promise returns. Records go back zeroed, so that they hold no event while pooled.
var (
	narrowRecords = sync.Pool{New: func() any { return new(narrowRecord) }}
	wideRecords   = sync.Pool{New: func() any { return new(wideRecord) }}
)

// newRecord builds the record for e as f says, from the pool its headers fit.
func newRecord(topic sink.Template, topics *topicCache, f *rec.Format, e *outbox.Event, done sink.Done) *record {
	if len(e.Headers) == 0 {
		r := narrowRecords.Get().(*narrowRecord) // zero: new, or zeroed by recycle
		r.fill(r.headers[:0], topic, topics, f, e, done)
		return &r.record
	}
	r := wideRecords.Get().(*wideRecord)
	r.fill(r.headers[:0], topic, topics, f, e, done)
	return &r.record
}

// fill makes r the record for e, its headers appended to hs. Keys and header values
// share e's memory instead of copying it: franz-go only reads them, and the event
// outlives the record's promise.
func (r *record) fill(hs []kgo.RecordHeader, topic sink.Template, topics *topicCache, f *rec.Format, e *outbox.Event, done sink.Done) {
	r.done = done
	// Always set: franz-go would read the clock for it otherwise.
	r.Timestamp = f.Timestamp(e, time.Now())
	own, n := f.Own(e, &r.created)
	for _, h := range own[:n] {
		hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	for _, h := range e.Headers {
		if v, ok := f.HeaderValue(h); ok {
			hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: v})
		}
	}
	r.Headers = hs
	r.Topic = topics.render(topic, e)
	r.Key = f.Key(e)
	r.Value, _ = f.Value(e) // a tombstone is a nil value
	presetPartition(&r.Record, e.Partition)
}

// recycle zeroes r and returns it to its pool. Its headers tell which: a narrow
// record's never outgrow their array of ownHeaders, and a wide record's start with
// room for more.
func (r *record) recycle() {
	if cap(r.Headers) > ownHeaders {
		w := (*wideRecord)(unsafe.Pointer(r))
		*w = wideRecord{}
		wideRecords.Put(w)
		return
	}
	n := (*narrowRecord)(unsafe.Pointer(r))
	*n = narrowRecord{}
	narrowRecords.Put(n)
}

// promise is the one callback every record shares.
func (s *Sink) promise(kr *kgo.Record, err error) {
	r := (*record)(unsafe.Pointer(kr))
	s.feed.release(r.size)
	if err == nil {
		r.done.Done(nil)
	} else if pf := partitionFault(kr); pf != nil {
		r.done.Done(&sink.EventError{Err: pf})
	} else if errors.Is(err, kerr.MessageTooLarge) {
		r.done.Done(s.tooLarge(kr, err))
	} else {
		s.forgetRecreatedTopic(kr.Topic, err)
		r.done.Done(classify(err))
	}
	r.recycle()
}

// topicCache keeps rendered topic names, so the usual handful of aggregate and
// event types cost no allocation per event. It is used by Publish's single caller.
type topicCache struct {
	mu        sync.Mutex
	m         map[[3]string]string // by the event's own template, aggregate and event type
	templates sink.Templates       // the events' own templates (outbox.Event.TopicTemplate)
}

func (c *topicCache) render(t sink.Template, e *outbox.Event) string {
	key := [3]string{e.TopicTemplate, e.AggregateType, e.EventType}
	c.mu.Lock()
	defer c.mu.Unlock()
	if topic, ok := c.m[key]; ok {
		return topic
	}
	topic := c.templates.Render(t, e)
	if c.m == nil || len(c.m) > 10000 { // bounded: names that never repeat are not cached for ever
		c.m = make(map[[3]string]string)
	}
	c.m[[3]string{strings.Clone(key[0]), strings.Clone(key[1]), strings.Clone(key[2])}] = topic
	return topic
}

// classify makes an error about the record itself an *sink.EventError and leaves
// anything else a plain error: a partition, its broker or the connection being
// unavailable, which the relay outlasts by ending the session and re-streaming
// from the confirmed LSN, order kept. See eventFault.
func classify(err error) error {
	if eventFault(err) {
		return &sink.EventError{Err: err}
	}
	return err
}

// eventFault reports whether the broker (or franz-go on its behalf) refused this
// record for what it is, so that it would be refused again however often it is
// sent; the Kafka sink and the exactly-once producer share it.
//
// About the record:
//   - MessageTooLarge, RecordListTooLarge: its size against the topic's limits.
//   - InvalidRecord: broker-side validation of the record (a null key on a
//     compacted topic, a rejected header, ...).
//   - CorruptMessage: the batch failed the broker's checks; older brokers say so
//     for a null key on a compacted topic too, and franz-go does not retry it,
//     so retrying the session could loop on it for ever.
//   - InvalidTopicException, TopicAuthorizationFailed: the topic the event's
//     types render to is not a valid or writable name.
//   - UnknownTopicOrPartition: the topic does not exist and was not created.
//     franz-go retries it itself (a stale broker's answer clears with a metadata
//     refresh) and surfaces it only after UnknownTopicRetries answers in a row
//     with no success between, or joined to ErrRecordTimeout when the topic's
//     metadata never loaded.
//
// Everything else is the partition or the producer, not the record:
//   - ErrRecordTimeout and ErrRecordRetries: franz-go fails them bare (kgo's
//     recBatch.maybeFailErr) after retriable answers such as NotLeaderForPartition,
//     LeaderNotAvailable, NotEnoughReplicas, RequestTimedOut or broken
//     connections, and fails the whole partition's buffer with them. That other
//     partitions are acknowledged meanwhile says one partition is down, not that
//     these records are bad.
//   - Retriable broker errors that outlive the retry limit (the same list, plus
//     NotEnoughReplicasAfterAppend, KafkaStorageError, UnknownTopicID: a topic
//     recreated under its name), and network errors.
//   - Errors about the producer or its transaction (ClusterAuthorizationFailed,
//     ProducerFenced, InvalidProducerEpoch, OutOfOrderSequenceNumber, ...), and
//     InvalidTimestamp, which judges the relay's clock: every record would fail
//     alike, so handing them over would dead-letter the whole stream.
func eventFault(err error) bool {
	kErr, ok := errors.AsType[*kerr.Error](err)
	if !ok {
		return false
	}
	switch kErr {
	case kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.CorruptMessage,
		kerr.InvalidTopicException, kerr.TopicAuthorizationFailed, kerr.UnknownTopicOrPartition:
		return true
	}
	return false
}

// Flush waits for every produced record's outcome, those waiting for room first.
func (s *Sink) Flush(ctx context.Context) error {
	if err := s.feed.waitHeld(ctx); err != nil {
		return fmt.Errorf("flush kafka sink: %w", err)
	}
	return s.client.Flush(ctx)
}

// Ping checks that a broker answers.
func (s *Sink) Ping(ctx context.Context) error { return s.client.Ping(ctx) }

// Close closes the client; records still waiting for room fail.
func (s *Sink) Close() {
	s.feed.close()
	s.client.Close()
}
