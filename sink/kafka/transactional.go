package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/outbox"
	rec "github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/sink"
)

// parsePosition reads "LSN/events origin"; records written before positions had an
// origin have none.
func parsePosition(s string) (sink.Position, error) {
	s, origin, _ := strings.Cut(s, " ")
	pos, err := parseLSNEvents(s)
	pos.Origin = origin
	return pos, err
}

func parseLSNEvents(s string) (sink.Position, error) {
	i := strings.LastIndexByte(s, '/')
	if i < 0 {
		return sink.Position{}, fmt.Errorf("progress record %q: want LSN/events", s)
	}
	lsn, err := pglogrepl.ParseLSN(s[:i])
	if err != nil {
		return sink.Position{}, fmt.Errorf("progress record %q: %w", s, err)
	}
	if s[i+1:] == "all" {
		return sink.Position{LSN: lsn, Events: -1}, nil
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil || n < 0 {
		return sink.Position{}, fmt.Errorf("progress record %q: bad event count", s)
	}
	return sink.Position{LSN: lsn, Events: n}, nil
}

// Transactional produces events in Kafka transactions, each ending with a record of
// the stream position in a compacted progress topic, so that the events and the
// position become visible together or not at all (as Kafka Connect's exactly-once
// source support does). One Transactional serves one replication session: a new
// one bumps the producer epoch, which aborts what an earlier or zombie instance left
// open and fences it out.
type Transactional struct {
	client   *kgo.Client
	feed     *feed // what Produce produces through: it never waits for room (feed.go)
	cfg      Config
	topic    sink.Template
	topics   topicCache
	progress string
	key      []byte
	// promiseFn is t.promise, bound once: a method value allocates.
	promiseFn func(*kgo.Record, error)

	inTxn bool
	// unanswered: a commit ended because the broker did not answer in time, so
	// Close does not wait on it again to abort; the next producer's fence aborts
	// the transaction instead (OpenStream).
	unanswered bool
	mu         sync.Mutex
	err        error                   // first produce error of the open transaction
	poison     map[sink.EventKey]error // records that failed on their own
}

// newTransactional connects a transactional producer with the sink's options. id
// names the stream (its cluster, database and slot) so that two streams never share
// a transactional id nor a progress record: it is the record's key, and the
// transactional id with a "walrelay-" prefix.
func newTransactional(cfg Config, id string) (*Transactional, error) {
	tmpl, err := sink.ParseTemplate(cfg.TopicTemplate)
	if err != nil {
		return nil, err
	}
	opts, err := clientOpts(cfg)
	if err != nil {
		return nil, err
	}
	client, err := kgo.NewClient(append(opts, kgo.TransactionalID("walrelay-"+id), kgo.TransactionTimeout(time.Minute))...)
	if err != nil {
		return nil, fmt.Errorf("kafka transactional client: %w", err)
	}
	t := &Transactional{client: client, cfg: cfg, topic: tmpl, progress: cfg.ProgressTopic, key: []byte(id)}
	t.promiseFn = t.promise
	t.feed = newFeed(client, t.promiseFn, cfg.MaxBufferedEvents, int64(cfg.MaxBufferedBytes))
	return t, nil
}

// Close aborts an open transaction, unless the broker left a commit unanswered,
// and closes the client.
func (t *Transactional) Close() {
	t.feed.close()
	if t.inTxn && !t.unanswered {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = t.client.AbortBufferedRecords(ctx)
		_ = t.client.EndTransaction(ctx, kgo.TryAbort)
		cancel()
	}
	t.client.Close()
}

// ensureProgressTopic creates the compacted, single-partition progress topic when
// it does not exist.
func (t *Transactional) ensureProgressTopic(ctx context.Context) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic = t.progress
	topic.NumPartitions = 1
	topic.ReplicationFactor = -1
	policy := "compact"
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "cleanup.policy", &policy
	topic.Configs = append(topic.Configs, cfg)
	req.Topics = append(req.Topics, topic)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(ctx, t.client)
	if err != nil {
		return fmt.Errorf("create progress topic %s: %w", t.progress, err)
	}
	for _, tr := range resp.Topics {
		if err := kerr.ErrorForCode(tr.ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create progress topic %s: %w", t.progress, err)
		}
	}
	return nil
}

// readProgress reads the stream's last committed position from the progress topic,
// seeing only committed transactions. ok is false when there is none.
func (t *Transactional) readProgress(ctx context.Context) (pos sink.Position, ok bool, err error) {
	secOpts, err := t.cfg.Security.Opts()
	if err != nil {
		return pos, false, err
	}
	opts := append(secOpts, t.cfg.Opts...)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(t.cfg.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{t.progress: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200 * time.Millisecond),
		// Transaction markers occupy the partition's last offsets: keeping them is how
		// the reader knows it reached the end.
		kgo.KeepControlRecords()}, opts...)...)
	if err != nil {
		return pos, false, fmt.Errorf("progress reader: %w", err)
	}
	defer cl.Close()
	end, err := t.stableEnd(ctx, cl)
	if err != nil {
		return pos, false, err
	}
	next := int64(0)
	for next < end {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return pos, false, fmt.Errorf("read progress topic %s: %w", t.progress, err)
		}
		for _, fe := range fetches.Errors() {
			return pos, false, fmt.Errorf("read progress topic %s: %w", t.progress, fe.Err)
		}
		var perr error
		fetches.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			if !r.Attrs.IsControl() && string(r.Key) == string(t.key) && perr == nil {
				pos, perr = parsePosition(string(r.Value))
				ok = perr == nil
			}
		})
		if perr != nil {
			return pos, false, perr
		}
	}
	return pos, ok, nil
}

// stableEnd is the progress partition's last stable offset: what read-committed
// readers can reach.
func (t *Transactional) stableEnd(ctx context.Context, cl *kgo.Client) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = 1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = t.progress
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 0, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("progress topic end offset: %w", err)
	}
	for _, tr := range resp.Topics {
		for _, pr := range tr.Partitions {
			if err := kerr.ErrorForCode(pr.ErrorCode); err != nil {
				return 0, fmt.Errorf("progress topic end offset: %w", err)
			}
			return pr.Offset, nil
		}
	}
	return 0, errors.New("progress topic end offset: no partition in the answer")
}

// Produce adds e to the open transaction, beginning one when needed. It never waits
// for room in the client's buffer (feed.go).
func (t *Transactional) Produce(e *outbox.Event) error {
	if !t.inTxn {
		if err := t.client.BeginTransaction(); err != nil {
			return fmt.Errorf("begin kafka transaction: %w", err)
		}
		t.inTxn = true
	}
	t.feed.produce(&newTxnRecord(t.topic, &t.topics, &t.cfg.Format, e).record)
	return nil
}

// txnRecord is the record of an event in a Kafka transaction, which also names
// the event a failure poisons. It is not recycled.
type txnRecord struct {
	record
	event   sink.EventKey
	headers [ownHeaders + 4]kgo.RecordHeader
}

// newTxnRecord builds the record for e as f says.
func newTxnRecord(topic sink.Template, topics *topicCache, f *rec.Format, e *outbox.Event) *txnRecord {
	r := &txnRecord{event: sink.KeyOf(e)}
	r.fill(r.headers[:0], topic, topics, f, e, nil)
	return r
}

// promise is the callback of the events' records (newRecord's).
func (t *Transactional) promise(kr *kgo.Record, err error) {
	r := (*txnRecord)(unsafe.Pointer(kr))
	t.feed.release(r.size)
	if err == nil {
		return
	}
	// A partition that is down fails the transaction but poisons no record: the
	// next replication session's transaction carries them again.
	poisoned := eventFault(err)
	if pf := partitionFault(kr); pf != nil {
		poisoned, err = true, pf
	}
	t.fail(err)
	if poisoned {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.poison == nil {
			t.poison = make(map[sink.EventKey]error)
		}
		t.poison[r.event] = &sink.EventError{Err: err}
	}
}

// progressPromise is the callback of the progress and fence records, which are no
// event's: their failure fails the transaction alone.
func (t *Transactional) progressPromise(_ *kgo.Record, err error) {
	if err != nil {
		t.fail(err)
	}
}

// fail records the first failure of the open transaction.
func (t *Transactional) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		t.err = err
	}
}

// Poisoned returns the events of the failed transaction that failed on their own
// (too large, invalid or forbidden topic): they will fail again in any transaction.
func (t *Transactional) Poisoned() map[sink.EventKey]error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.poison
}

// Commit writes pos to the progress topic in the open transaction and commits it.
// After an error the Transactional is unusable: close it and start a new session.
func (t *Transactional) Commit(ctx context.Context, pos sink.Position) error {
	if !t.inTxn {
		return nil
	}
	err := t.feed.waitHeld(ctx)
	if err == nil {
		t.client.Produce(ctx, &kgo.Record{Topic: t.progress, Key: t.key, Value: []byte(pos.String())}, t.progressPromise)
		err = t.client.Flush(ctx)
	}
	if err != nil {
		t.unanswered = ctx.Err() != nil
		return fmt.Errorf("flush kafka transaction: %w", err)
	}
	t.mu.Lock()
	produceErr := t.err
	t.mu.Unlock()
	if produceErr != nil {
		return fmt.Errorf("kafka transaction: a record failed: %w", produceErr)
	}
	if err := t.client.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.unanswered = ctx.Err() != nil
		return fmt.Errorf("commit kafka transaction at %s: %w", pos, err)
	}
	t.inTxn = false
	return nil
}

// fence initialises the producer id with an empty, aborted transaction: the epoch
// bump aborts what an earlier producer of the same transactional id left open and
// makes any zombie of it fail, before the progress is read.
func (t *Transactional) fence(ctx context.Context) error {
	if err := t.client.BeginTransaction(); err != nil {
		return fmt.Errorf("fence: begin kafka transaction: %w", err)
	}
	t.client.Produce(context.Background(), &kgo.Record{Topic: t.progress, Key: []byte("walrelay-fence")}, t.progressPromise)
	if err := t.client.Flush(ctx); err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	if err := t.client.EndTransaction(ctx, kgo.TryAbort); err != nil {
		return fmt.Errorf("fence: abort kafka transaction: %w", err)
	}
	t.mu.Lock()
	t.err = nil // the fence record's outcome does not matter
	t.mu.Unlock()
	return nil
}

// OpenStream opens a transactional producer for the stream named id: it makes sure
// the progress topic exists, fences earlier producers of the stream, then reads the
// position they committed. See sink.Transactional.
func (s *Sink) OpenStream(ctx context.Context, id string) (sink.StreamProducer, sink.Position, bool, error) {
	t, err := newTransactional(s.cfg, id)
	if err != nil {
		return nil, sink.Position{}, false, err
	}
	err = t.ensureProgressTopic(ctx)
	if err == nil {
		err = t.fence(ctx)
	}
	var pos sink.Position
	var ok bool
	if err == nil {
		pos, ok, err = t.readProgress(ctx)
	}
	if err != nil {
		t.Close()
		return nil, sink.Position{}, false, err
	}
	return t, pos, ok, nil
}
