package consumer_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/consumer"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/sink/kafka"
)

// Every record delivered twice: each event has one effect, the second copies are
// recognised as duplicates, and the offsets of all of them are committed.
func TestDuplicateDeliveries(t *testing.T) {
	t.Parallel()
	const n = 60
	pool := counterDB(t)
	broker := testenv.Kafka(t)
	evs := events(n, 7)
	produceEvents(t, broker.ListenAddrs(), evs)
	produceEvents(t, broker.ListenAddrs(), evs) // the same events again, as a relay restart would

	cl := groupClient(t, broker.ListenAddrs(), "dup")
	obs := newObserved()
	cfg := consumer.Config{DB: pool, Client: cl, Handle: countEvent}
	consumer.SetAfterDBCommit(&cfg, func(rec *kgo.Record, ran bool) error { obs.hook(rec, ran); return nil })
	r := start(t, cfg)
	r.until(t, 30*time.Second, "both copies of every record", func() bool {
		ran, dups := obs.counts()
		return ran+dups == 2*n
	})
	r.stop(t)
	cl.Close()

	ran, dups := obs.counts()
	if ran != n || dups != n {
		t.Errorf("handled %d and skipped %d as duplicates, want %d and %d", ran, dups, n, n)
	}
	for _, ev := range evs {
		if obs.ran[ev.ID] != 1 || obs.dups[ev.ID] != 1 {
			t.Errorf("event %s: ran %d times, duplicate %d times, want 1 and 1", ev.ID, obs.ran[ev.ID], obs.dups[ev.ID])
		}
	}
	checkCounters(t, pool, evs)
	if got := countRows(t, pool, "processed_events"); got != n {
		t.Errorf("processed_events has %d rows, want %d", got, n)
	}

	// Everything consumed was committed, the last batch on the way out: a new
	// member of the group gets only what is produced afterwards.
	marker := event{ID: newUUID(), AggregateID: "marker"}
	produceEvents(t, broker.ListenAddrs(), []event{marker})
	cl2 := groupClient(t, broker.ListenAddrs(), "dup")
	defer cl2.Close()
	obs2 := newObserved()
	cfg.Client = cl2
	consumer.SetAfterDBCommit(&cfg, func(rec *kgo.Record, ran bool) error { obs2.hook(rec, ran); return nil })
	r2 := start(t, cfg)
	r2.until(t, 30*time.Second, "the marker", func() bool { ran, _ := obs2.counts(); return ran > 0 })
	r2.stop(t)
	if len(obs2.seq) != 1 || obs2.seq[0] != marker.ID {
		t.Errorf("after a restart the group re-delivered %d records, want only the marker", len(obs2.seq))
	}
}

var errCrash = errors.New("simulated crash between the DB commit and the offset commit")

// The consumer dies after the k-th record's transaction committed and before any
// offset of its batch is committed. A new member of the group gets those records
// again; Once recognises them and every event still has exactly one effect.
func TestCrashBetweenDBCommitAndOffsetCommit(t *testing.T) {
	t.Parallel()
	const n, k, batch = 40, 25, 10
	pool := counterDB(t)
	broker := testenv.Kafka(t)
	evs := events(n, 5)
	produceEvents(t, broker.ListenAddrs(), evs)

	cl := groupClient(t, broker.ListenAddrs(), "crash", kgo.BlockRebalanceOnPoll())
	first := newObserved()
	var crashed string
	cfg := consumer.Config{DB: pool, Client: cl, Handle: countEvent, MaxPollRecords: batch}
	consumer.SetAfterDBCommit(&cfg, func(rec *kgo.Record, ran bool) error {
		first.hook(rec, ran)
		if r, _ := first.counts(); r == k {
			crashed = testenv.Header(rec, "id")
			return errCrash
		}
		return nil
	})
	r := start(t, cfg)
	if err := r.wait(t); !errors.Is(err, errCrash) {
		t.Fatalf("first consumer: Run returned %v, want the simulated crash", err)
	}
	cl.Close() // autocommit is disabled: leaving the group commits nothing
	if ran, dups := first.counts(); ran != k || dups != 0 {
		t.Fatalf("first consumer handled %d (%d duplicates), want %d (0)", ran, dups, k)
	}
	if got := countRows(t, pool, "processed_events"); got != k {
		t.Fatalf("after the crash processed_events has %d rows, want %d", got, k)
	}

	cl2 := groupClient(t, broker.ListenAddrs(), "crash", kgo.BlockRebalanceOnPoll())
	defer cl2.CloseAllowingRebalance()
	second := newObserved()
	cfg.Client = cl2
	consumer.SetAfterDBCommit(&cfg, func(rec *kgo.Record, ran bool) error { second.hook(rec, ran); return nil })
	r2 := start(t, cfg)
	r2.until(t, 30*time.Second, "the rest of the events and the crashed record again", func() bool {
		ran, _ := second.counts()
		second.mu.Lock()
		defer second.mu.Unlock()
		return ran == n-k && second.dups[crashed] > 0
	})
	r2.stop(t)

	ran, dups := second.counts()
	t.Logf("second consumer: %d handled, %d re-delivered and skipped as duplicates", ran, dups)
	// Only the crashed batch comes again: the batches before it were committed.
	if dups == 0 || dups > batch {
		t.Errorf("%d re-delivered records recognised as duplicates, want 1 to %d (the crashed batch)", dups, batch)
	}
	for _, ev := range evs {
		if total := first.ran[ev.ID] + second.ran[ev.ID]; total != 1 {
			t.Errorf("event %s was handled %d times, want 1", ev.ID, total)
		}
		if first.ran[ev.ID] == 0 && second.dups[ev.ID] > 0 {
			t.Errorf("event %s was skipped as a duplicate but never handled", ev.ID)
		}
	}
	checkCounters(t, pool, evs)
	if got := countRows(t, pool, "processed_events"); got != n {
		t.Errorf("processed_events has %d rows, want %d", got, n)
	}
}

var errPoison = errors.New("handler cannot process this event")

// A transient handler failure is retried in a new transaction and applied once; a
// persistent one stops Run with a *RecordError after MaxAttempts, with the offsets
// before it committed and its own not, so the group gets it again.
func TestRetryThenGiveUp(t *testing.T) {
	t.Parallel()
	pool := counterDB(t)
	broker := testenv.Kafka(t)
	// One aggregate, so one partition and a fixed order.
	evs := []event{
		{ID: newUUID(), AggregateID: "o"}, // ok
		{ID: newUUID(), AggregateID: "o"}, // fails twice, then ok
		{ID: newUUID(), AggregateID: "o"}, // always fails
		{ID: newUUID(), AggregateID: "o"}, // ok, never reached
	}
	produceEvents(t, broker.ListenAddrs(), evs)

	var mu sync.Mutex
	calls := map[string]int{}
	handle := func(ctx context.Context, tx pgx.Tx, rec *kgo.Record) error {
		if err := countEvent(ctx, tx, rec); err != nil { // written, then rolled back on failure
			return err
		}
		id := testenv.Header(rec, "id")
		mu.Lock()
		calls[id]++
		c := calls[id]
		mu.Unlock()
		switch {
		case id == evs[1].ID && c <= 2:
			return errors.New("transient failure")
		case id == evs[2].ID:
			return errPoison
		}
		return nil
	}
	cl := groupClient(t, broker.ListenAddrs(), "retry")
	cfg := consumer.Config{DB: pool, Client: cl, Handle: handle, MaxAttempts: 3,
		RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond}
	err := start(t, cfg).wait(t)
	cl.Close()
	var recErr *consumer.RecordError
	if !errors.As(err, &recErr) || !errors.Is(err, errPoison) {
		t.Fatalf("Run returned %v, want a *RecordError wrapping the handler's error", err)
	}
	if recErr.EventID != evs[2].ID || recErr.Attempts != 3 || testenv.Header(recErr.Record, "id") != evs[2].ID {
		t.Errorf("RecordError for event %s after %d attempts, want %s after 3", recErr.EventID, recErr.Attempts, evs[2].ID)
	}
	if calls[evs[1].ID] != 3 || calls[evs[2].ID] != 3 || calls[evs[3].ID] != 0 {
		t.Errorf("handler calls %d, %d, %d, want 3, 3, 0", calls[evs[1].ID], calls[evs[2].ID], calls[evs[3].ID])
	}
	checkCounters(t, pool, evs[:2]) // failed attempts left nothing behind
	if got := countRows(t, pool, "processed_events"); got != 2 {
		t.Errorf("processed_events has %d rows, want 2", got)
	}

	// Fixed handler, new client: the group resumes at the failed record.
	cl2 := groupClient(t, broker.ListenAddrs(), "retry")
	defer cl2.Close()
	obs := newObserved()
	cfg = consumer.Config{DB: pool, Client: cl2, Handle: countEvent}
	consumer.SetAfterDBCommit(&cfg, func(rec *kgo.Record, ran bool) error { obs.hook(rec, ran); return nil })
	r := start(t, cfg)
	r.until(t, 30*time.Second, "the last event", func() bool { ran, _ := obs.counts(); return ran == 2 })
	r.stop(t)
	if len(obs.seq) != 2 || obs.seq[0] != evs[2].ID || obs.seq[1] != evs[3].ID {
		t.Errorf("after the failure the group re-delivered %d records, want the failed one and the next", len(obs.seq))
	}
	checkCounters(t, pool, evs)
}

// A record without an "id" header cannot be deduplicated: Run returns at once,
// without calling Handle or retrying.
func TestMissingEventID(t *testing.T) {
	t.Parallel()
	pool := counterDB(t)
	broker := testenv.Kafka(t)
	produce(t, broker.ListenAddrs(), &kgo.Record{Topic: topic, Key: []byte("o"), Value: []byte(`{}`)})
	cl := groupClient(t, broker.ListenAddrs(), "noid")
	defer cl.Close()
	called := false
	cfg := consumer.Config{DB: pool, Client: cl, MaxAttempts: 3,
		Handle: func(context.Context, pgx.Tx, *kgo.Record) error { called = true; return nil }}
	err := start(t, cfg).wait(t)
	var recErr *consumer.RecordError
	if !errors.Is(err, consumer.ErrInvalidEventID) || !errors.As(err, &recErr) || recErr.Attempts != 1 {
		t.Fatalf("Run returned %v, want a RecordError wrapping ErrInvalidEventID after 1 attempt", err)
	}
	if !strings.Contains(err.Error(), `no "id" header`) {
		t.Errorf("error %q does not say the id header is missing", err)
	}
	if called {
		t.Error("Handle was called for a record without an event id")
	}
}

func TestConfigValidate(t *testing.T) {
	err := consumer.Run(context.Background(), consumer.Config{RetryMin: time.Second, RetryMax: time.Millisecond})
	for _, want := range []string{"DB is required", "Client is required", "Handle is required", "RetryMin"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Run with an empty config: %v, want it to mention %q", err, want)
		}
	}
}

// The real relay publishes outbox rows; the consumer applies each once.
func TestRelayToConsumer(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	pool := newPool(t, dbURL)
	if _, err := pool.Exec(context.Background(),
		`CREATE TABLE counters (aggregate_id text PRIMARY KEY, n bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	broker := testenv.Kafka(t)
	conn := testenv.Connect(t, dbURL)
	var evs []event
	for i := range 5 {
		for _, ev := range testenv.WriteTx(t, conn, []string{"a", "b", "c"}, "order.created", 2+i, false) {
			evs = append(evs, event{ID: ev.ID, AggregateID: ev.AggregateID})
		}
	}

	snk, err := kafka.New(kafka.Config{Brokers: broker.ListenAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(snk.Close)
	rcfg := relay.DefaultConfig()
	rcfg.DatabaseURL = dbURL
	rcfg.Sink = snk
	rcfg.Slot = "consumer_" + strings.ReplaceAll(newUUID()[:13], "-", "_") // slots are cluster-wide: one per run
	rcfg.Logger = slog.New(slog.DiscardHandler)
	rl, err := relay.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	rctx, stopRelay := context.WithCancel(context.Background())
	relayDone := make(chan error, 1)
	go func() { relayDone <- rl.Run(rctx) }()
	defer func() {
		stopRelay()
		if err := <-relayDone; err != nil {
			t.Errorf("relay.Run: %v", err)
		}
	}()

	cl := groupClient(t, broker.ListenAddrs(), "relay", kgo.BlockRebalanceOnPoll(),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(time.Second))
	defer cl.CloseAllowingRebalance()
	obs := newObserved()
	cfg := consumer.Config{DB: pool, Client: cl, Handle: countEvent}
	consumer.SetAfterDBCommit(&cfg, func(rec *kgo.Record, ran bool) error { obs.hook(rec, ran); return nil })
	r := start(t, cfg)
	r.until(t, 45*time.Second, "every event", func() bool { ran, _ := obs.counts(); return ran == len(evs) })
	r.stop(t)
	checkCounters(t, pool, evs)
	if got := countRows(t, pool, "processed_events"); got != len(evs) {
		t.Errorf("processed_events has %d rows, want %d", got, len(evs))
	}
}
