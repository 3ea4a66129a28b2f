package relay_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/catalog"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/migrations"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/relay"
)

func fastRetries(c *config) {
	c.Retry = poller.Policy{MaxAttempts: 3, BackoffMin: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond}
	c.PollInterval = 50 * time.Millisecond
}

// A poison event (larger than the producer may send) is a dead letter at its first
// attempt, since no retry can send it, with an error naming both limits, an ERROR
// line and a count, while the healthy events around it all flow. Once the limit is
// raised, a dlq retry gets it delivered.
func TestPoisonEventBecomesDeadLetter(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	broker := testenv.Kafka(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "4000000"}))
	conn := testenv.Connect(t, dbURL)
	reg := prometheus.NewRegistry()
	rn := start(t, dbURL, broker, "poison", fastRetries, func(c *config) { c.Registry = reg })
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	aggs := aggregates("ps", 50)
	ctx := context.Background()

	var healthy []outbox.Event
	for i := 0; i < 10; i++ {
		healthy = append(healthy, testenv.WriteTx(t, conn, aggs, "healthy", 500, false)...)
		if i == 4 {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			poison := outbox.Event{AggregateType: "order", AggregateID: "poison", EventType: "huge",
				Payload: []byte(`{"blob": "` + strings.Repeat("x", 1_500_000) + `"}`)}
			if err := outbox.Write(ctx, tx, &poison); err != nil {
				t.Fatal(err)
			}
			healthy = append(healthy, testenv.WriteTx(t, conn, aggs, "healthy.same.tx", 0, false)...)
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !consumer.WaitDistinct(2*time.Minute, len(healthy)) {
		t.Fatalf("healthy events: %d of %d delivered", consumer.Distinct(), len(healthy))
	}

	var poisonID string
	var attempts int
	var lastError string
	deadline := time.Now().Add(time.Minute)
	for {
		err := conn.QueryRow(ctx, "SELECT id::text, attempts, last_error FROM outbox_events_dead_letters").Scan(&poisonID, &attempts, &lastError)
		if err == nil {
			break
		}
		if err != pgx.ErrNoRows || time.Now().After(deadline) {
			t.Fatalf("poison event not dead-lettered: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition with a deadline
	}
	if attempts != 1 {
		t.Errorf("dead letter after %d attempts, want 1: no retry can send a record above the producer's limit", attempts)
	}
	for _, want := range []string{"MESSAGE_TOO_LARGE", "--kafka-max-message-bytes", "max.message.bytes", "producer's limit of 1000012 bytes"} {
		if !strings.Contains(lastError, want) {
			t.Errorf("last_error lacks %q: %s", want, lastError)
		}
	}
	if !rn.waitLog(10*time.Second, "event dead-lettered") {
		t.Fatal("no ERROR line for the dead letter")
	}
	for line := range strings.Lines(rn.logs.String()) {
		if !strings.Contains(line, "event dead-lettered") {
			continue
		}
		for _, want := range []string{"level=ERROR", "event_id=" + poisonID, "table=public.outbox_events", "attempts=1", "MESSAGE_TOO_LARGE"} {
			if !strings.Contains(line, want) {
				t.Errorf("the dead letter's line lacks %q: %s", want, line)
			}
		}
	}
	if got := testutil.ToFloat64(metricByName(t, reg, "walrelay_dead_lettered_events_total")); got != 1 {
		t.Errorf("walrelay_dead_lettered_events_total{table=public.outbox_events} = %v, want 1", got)
	}
	// The published horizon follows the acks the consumer already saw.
	waitFor(t, 30*time.Second, "every healthy row published", func() bool {
		var pending int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox_events_pending WHERE dead_lettered_at IS NULL").Scan(&pending); err != nil {
			t.Fatal(err)
		}
		return pending == 0
	})

	// The operator raises the producer's limit and retries the dead letter.
	rn.stop()
	start(t, dbURL, broker, "poison", fastRetries, func(c *config) { c.Sinks.Kafka.MaxMessageBytes = 3_000_000 })
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	n, err := poller.NewStore(pool, catalog.DefaultShape("outbox_events"), poller.DefaultPolicy()).RetryDeadLetters(ctx, nil, true)
	if err != nil || n != 1 {
		t.Fatalf("dlq retry: %d rows, %v", n, err)
	}
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(poisonID) > 0 }) {
		t.Fatal("retried dead letter not delivered")
	}
	for _, ev := range healthy {
		if c := consumer.Count(ev.ID); c != 1 {
			t.Errorf("healthy event %s delivered %d times", ev.ID, c)
		}
	}
}

// While the broker is down, nothing is handed to the poller, even when events
// outlive their deadline: that is a broker outage, not an event failure. Everything
// drains once it returns.
func TestBrokerOutageHandsNothingOver(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	start(t, dbURL, broker, "outage", fastRetries, func(c *config) { c.Sinks.Kafka.EventTimeout = time.Second })
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	aggs := aggregates("out", 30)

	var written []outbox.Event
	for i := 0; i < 5; i++ {
		written = append(written, testenv.WriteTx(t, conn, aggs, "before", 100, false)...)
	}
	if !consumer.WaitDistinct(time.Minute, 100) {
		t.Fatal("nothing delivered before the outage")
	}
	fault := broker.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotEnoughReplicas, Count: -1})
	for i := 0; i < 10; i++ {
		written = append(written, testenv.WriteTx(t, conn, aggs, "during", 100, false)...)
	}
	// Outlive the event deadline twice over before the broker comes back.
	if err := fault.Wait(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	outageEnds := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(outageEnds) {
		assertNothingHandedOver(t, conn)
		time.Sleep(100 * time.Millisecond) // sampling a state over time is the point here
	}
	fault.Remove()
	for i := 0; i < 5; i++ {
		written = append(written, testenv.WriteTx(t, conn, aggs, "after", 100, false)...)
	}
	if !consumer.WaitDistinct(2*time.Minute, len(written)) {
		t.Fatalf("after the outage: %d of %d delivered", consumer.Distinct(), len(written))
	}
	assertNothingHandedOver(t, conn)
}

func assertNothingHandedOver(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM outbox_events WHERE attempts > 0 OR retry_after IS NOT NULL").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d rows handed to the poller during a broker outage", n)
	}
}

// Poll-only mode: four relays of three workers each poll one table while a writer
// commits; every row is delivered once, in commit order per aggregate.
func TestPollModeConcurrentPollers(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	if err := migrations.InstallNotify(context.Background(), dbURL); err != nil {
		t.Fatal(err)
	}
	broker := testenv.Kafka(t)
	for i := 0; i < 4; i++ {
		start(t, dbURL, broker, "unused", func(c *config) {
			c.Mode = relay.ModePoll
			c.PollBatchSize = 50
			c.PollWorkers = 3
			c.PollInterval = 200 * time.Millisecond
		})
	}
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)

	// Two writers interleave transactions on the same aggregates; each writer's
	// transactions commit in order.
	aggs := aggregates("pl", 40)
	var mu sync.Mutex
	var written []outbox.Event
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		conn := testenv.Connect(t, dbURL)
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 30; i++ {
				mu.Lock() // commit order is the order of appends
				written = append(written, testenv.WriteTx(t, conn, aggs[w*3:], fmt.Sprintf("w%d", w), 1+i%20, false)...)
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	if !consumer.WaitDistinct(2*time.Minute, len(written)) {
		t.Fatalf("delivered %d of %d", consumer.Distinct(), len(written))
	}
	marker := testenv.WriteTx(t, testenv.Connect(t, dbURL), []string{"marker"}, "marker", 1, false)[0]
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(marker.ID) > 0 }) {
		t.Fatal("marker not delivered")
	}
	seq := map[string]int{}
	for i, ev := range written {
		seq[ev.ID] = i
	}
	last := map[string]int{}
	for _, rec := range consumer.Records {
		id := testenv.Header(rec, "id")
		if id == marker.ID {
			continue
		}
		if n := consumer.Count(id); n != 1 {
			t.Fatalf("event %s delivered %d times in a clean run", id, n)
		}
		agg := string(rec.Key)
		if prev, ok := last[agg]; ok && seq[id] < prev {
			t.Fatalf("aggregate %s: event at commit position %d delivered after position %d", agg, seq[id], prev)
		}
		last[agg] = seq[id]
	}
	// A poll's marks commit just after its records reach the broker.
	conn := testenv.Connect(t, dbURL)
	waitFor(t, 30*time.Second, "every row marked processed", func() bool {
		var unprocessed int
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM outbox_events WHERE processed_at IS NULL").Scan(&unprocessed); err != nil {
			t.Fatal(err)
		}
		return unprocessed == 0
	})
}

// Poll-only mode, one aggregate, several workers: a worker whose candidates another
// held back waits, and the worker that publishes the earlier rows wakes it, so the
// backlog drains without waiting for the interval (an hour here) and in order.
func TestPollWorkersDrainOneAggregate(t *testing.T) {
	t.Parallel()
	// A cluster of its own: poll mode holds a row back while any older transaction of
	// the cluster runs, in any database, and the parallel tests on the shared cluster
	// keep some open for longer than this test waits at its hour-long poll interval.
	_, dbURL := ownCluster(t, "", nil)
	broker, conn := testenv.Kafka(t), testenv.Connect(t, dbURL)
	var written []outbox.Event
	for i := 0; i < 40; i++ {
		written = append(written, testenv.WriteTx(t, conn, []string{"hot"}, fmt.Sprintf("t%d", i), 50, false)...)
	}
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	start(t, dbURL, broker, "unused", func(c *config) {
		c.Mode = relay.ModePoll
		c.PollBatchSize = 30
		c.PollWorkers = 4
		c.PollInterval = time.Hour
	})
	if !consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("delivered %d of %d", consumer.Distinct(), len(written))
	}
	if len(consumer.Records) != len(written) {
		t.Fatalf("%d records for %d events in a clean run", len(consumer.Records), len(written))
	}
	for i, rec := range consumer.Records {
		if id := testenv.Header(rec, "id"); id != written[i].ID {
			t.Fatalf("record %d is event %s, want %s (commit order)", i, id, written[i].ID)
		}
	}
}

// A row that cannot become an event (created_at = infinity) becomes a dead letter
// with the reason, and everything else goes on: whether the stream decodes it, the
// catch-up pass reads it (written before the slot existed), or the poller does.
func TestUnmappableRowIsDeadLettered(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		beforeStart bool
		mode        relay.Mode
	}{{"stream", false, relay.ModeStream}, {"catchup", true, relay.ModeStream}, {"poll", false, relay.ModePoll}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbURL := testenv.MigratedDatabase(t)
			broker := testenv.Kafka(t)
			conn := testenv.Connect(t, dbURL)
			ctx := context.Background()
			writeBad := func() string {
				var id string
				if err := conn.QueryRow(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at)
					VALUES ('order', 'bad', 'odd', '{}', 'infinity') RETURNING id::text`).Scan(&id); err != nil {
					t.Fatal(err)
				}
				return id
			}
			var badID string
			if tc.beforeStart {
				badID = writeBad()
			}
			reg := prometheus.NewRegistry()
			start(t, dbURL, broker, "unmappable_"+tc.name, func(c *config) {
				c.Mode = tc.mode
				c.PollInterval = 100 * time.Millisecond
				c.Registry = reg
			})
			consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
			if !tc.beforeStart {
				badID = writeBad()
			}
			good := testenv.WriteTx(t, conn, []string{"g"}, "fine", 20, false)
			if !consumer.WaitDistinct(time.Minute, len(good)) {
				t.Fatalf("delivered %d of %d events after the bad row", consumer.Distinct(), len(good))
			}
			waitFor(t, 30*time.Second, "the bad row in outbox_events_dead_letters", func() bool {
				var reason string
				err := conn.QueryRow(ctx, "SELECT last_error FROM outbox_events_dead_letters WHERE id = $1", badID).Scan(&reason)
				return err == nil && strings.Contains(reason, "created_at")
			})
			if consumer.Count(badID) != 0 {
				t.Fatal("the unmappable row was published")
			}
			waitFor(t, 10*time.Second, "walrelay_dead_lettered_events_total 1", func() bool {
				fams, err := reg.Gather()
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range fams {
					if f.GetName() == "walrelay_dead_lettered_events_total" {
						return len(f.GetMetric()) == 1 && f.GetMetric()[0].GetCounter().GetValue() == 1
					}
				}
				return false
			})
		})
	}
}

// Exactly-once delivery with a poison event: the event is handed to the poller and
// ends as a dead letter; every healthy event, including those of its transaction,
// is seen exactly once by a read_committed consumer.
func TestExactlyOncePoisonEvent(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	broker := testenv.Kafka(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "4000000"}))
	conn := testenv.Connect(t, dbURL)
	start(t, dbURL, broker, "eo_poison", fastRetries, func(c *config) { c.Delivery = relay.ExactlyOnce })
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ctx := context.Background()

	var healthy []outbox.Event
	healthy = append(healthy, testenv.WriteTx(t, conn, aggregates("eop", 10), "before", 100, false)...)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		ev := outbox.Event{AggregateType: "order", AggregateID: fmt.Sprintf("same-tx-%d", i), EventType: "healthy", Payload: []byte(`{}`)}
		if err := outbox.Write(ctx, tx, &ev); err != nil {
			t.Fatal(err)
		}
		healthy = append(healthy, ev)
	}
	poison := outbox.Event{AggregateType: "order", AggregateID: "poison", EventType: "huge",
		Payload: []byte(`{"blob": "` + strings.Repeat("x", 1_500_000) + `"}`)}
	if err := outbox.Write(ctx, tx, &poison); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	healthy = append(healthy, testenv.WriteTx(t, conn, aggregates("eop", 10), "after", 100, false)...)

	if !consumer.WaitDistinct(time.Minute, len(healthy)) {
		t.Fatalf("healthy events: %d of %d", consumer.Distinct(), len(healthy))
	}
	waitFor(t, time.Minute, "the poison event in outbox_events_dead_letters", func() bool {
		var n int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox_events_dead_letters WHERE id = $1", poison.ID).Scan(&n)
		return err == nil && n == 1
	})
	marker := testenv.WriteTx(t, conn, []string{"m"}, "marker", 1, false)[0]
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(marker.ID) > 0 }) {
		t.Fatal("marker not delivered")
	}
	for _, ev := range healthy {
		if n := consumer.Count(ev.ID); n != 1 {
			t.Errorf("healthy event %s seen %d times", ev.ID, n)
		}
	}
}
