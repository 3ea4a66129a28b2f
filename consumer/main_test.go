package consumer_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/consumer"
	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const topic = "outbox.event.order"

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// event is one outbox event as the relay would publish it.
type event struct {
	ID, AggregateID string
}

func events(n, aggregates int) []event {
	out := make([]event, n)
	for i := range out {
		out[i] = event{ID: newUUID(), AggregateID: fmt.Sprintf("order-%d", i%aggregates)}
	}
	return out
}

// record builds the record walrelay publishes for ev.
func record(ev event) *kgo.Record {
	return &kgo.Record{
		Topic: topic,
		Key:   []byte(ev.AggregateID),
		Value: []byte(`{"customer_id": "` + ev.AggregateID + `"}`),
		Headers: []kgo.RecordHeader{
			{Key: "id", Value: []byte(ev.ID)},
			{Key: "event_type", Value: []byte("order.created")},
			{Key: "aggregate_type", Value: []byte("order")},
			{Key: "aggregate_id", Value: []byte(ev.AggregateID)},
			{Key: "created_at", Value: []byte(time.Now().UTC().Format(time.RFC3339))},
		},
	}
}

// produce writes the records for evs, in order, and waits for the acks.
func produce(t *testing.T, brokers []string, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func produceEvents(t *testing.T, brokers []string, evs []event) {
	t.Helper()
	recs := make([]*kgo.Record, len(evs))
	for i, ev := range evs {
		recs[i] = record(ev)
	}
	produce(t, brokers, recs...)
}

// groupClient is a group consumer as consumer.Config documents it.
func groupClient(t *testing.T, brokers []string, group string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(100 * time.Millisecond)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func newPool(t *testing.T, dbURL string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// counterDB is a migrated database with a counters table the handlers update.
func counterDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := newPool(t, testenv.MigratedDatabase(t))
	if _, err := pool.Exec(context.Background(),
		`CREATE TABLE counters (aggregate_id text PRIMARY KEY, n bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return pool
}

// countEvent is the handlers' effect: one increment per event, in the same tx.
func countEvent(ctx context.Context, tx pgx.Tx, rec *kgo.Record) error {
	_, err := tx.Exec(ctx, `INSERT INTO counters (aggregate_id, n) VALUES ($1, 1)
		ON CONFLICT (aggregate_id) DO UPDATE SET n = counters.n + 1`, string(rec.Key))
	return err
}

// counters returns the counters table.
func counters(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT aggregate_id, n FROM counters")
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct {
		agg string
		n   int
	}, error) {
		var v struct {
			agg string
			n   int
		}
		err := r.Scan(&v.agg, &v.n)
		return v, err
	})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int{}
	for _, v := range got {
		m[v.agg] = v.n
	}
	return m
}

// wantCounters is one effect per distinct event.
func wantCounters(evs []event) map[string]int {
	m := map[string]int{}
	for _, ev := range evs {
		m[ev.AggregateID]++
	}
	return m
}

func checkCounters(t *testing.T, pool *pgxpool.Pool, evs []event) {
	t.Helper()
	got, want := counters(t, pool), wantCounters(evs)
	if len(got) != len(want) {
		t.Errorf("counters: %v, want %v", got, want)
	}
	for agg, n := range want {
		if got[agg] != n {
			t.Errorf("counter %s = %d, want %d (one effect per event)", agg, got[agg], n)
		}
	}
}

func countRows(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// observed counts what a Run did, through the after-commit hook.
type observed struct {
	mu   sync.Mutex
	ran  map[string]int // event id -> Handle committed
	dups map[string]int // event id -> Once reported a duplicate
	seq  []string       // event ids in processing order
}

func newObserved() *observed { return &observed{ran: map[string]int{}, dups: map[string]int{}} }

func (o *observed) hook(rec *kgo.Record, ran bool) {
	id := testenv.Header(rec, "id")
	o.mu.Lock()
	defer o.mu.Unlock()
	if ran {
		o.ran[id]++
	} else {
		o.dups[id]++
	}
	o.seq = append(o.seq, id)
}

func (o *observed) counts() (ran, dups int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, n := range o.ran {
		ran += n
	}
	for _, n := range o.dups {
		dups += n
	}
	return ran, dups
}

// running is a consumer.Run in a goroutine.
type running struct {
	cancel   context.CancelFunc
	finished chan struct{}
	err      error // Run's result, once finished is closed
}

func start(t *testing.T, cfg consumer.Config) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, finished: make(chan struct{})}
	go func() {
		defer close(r.finished)
		r.err = consumer.Run(ctx, cfg)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.finished
	})
	return r
}

// wait returns Run's result, failing the test if it does not come in time.
func (r *running) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-r.finished:
		return r.err
	case <-time.After(20 * time.Second):
		t.Fatal("consumer.Run did not return within 20s")
		return nil
	}
}

// stop cancels Run and expects the graceful nil.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := r.wait(t); err != nil {
		t.Fatalf("consumer.Run after cancel: %v, want nil", err)
	}
}

// until polls cond until it holds, failing the test at the deadline or when Run
// returned first.
func (r *running) until(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		select {
		case <-r.finished:
			t.Fatalf("consumer.Run returned %v while waiting for %s", r.err, what)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
}
