// Package demo runs walrelay end to end on its embedded defaults: a throwaway
// PostgreSQL cluster and an in-process Kafka-protocol broker (franz-go's kfake).
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/pgcluster"
	"github.com/walrelay/walrelay/migrations"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/sink/kafka"
)

// Options of a demo run.
type Options struct {
	Events  int       // orders to write
	Rate    float64   // orders per second; 0: as fast as one writer goes
	Verbose bool      // show the relay's logs
	Out     io.Writer // where the report goes
}

// DefaultOptions writes 20 orders at 50 per second.
func DefaultOptions() Options { return Options{Events: 20, Rate: 50, Out: os.Stdout} }

// printedEvents is how many per-event lines are shown before only progress is.
const printedEvents = 25

// Run starts everything, writes the orders, consumes them back, prints the report
// and tears everything down. It fails when an order is missing, duplicated beyond
// what at-least-once allows, or the rolled-back order shows up.
func Run(ctx context.Context, opts Options) error {
	out := opts.Out
	fmt.Fprintln(out, "starting a throwaway PostgreSQL (wal_level=logical)...")
	// Synchronous commit: the walsender sends only flushed WAL, and asynchronous commits
	// are flushed every wal_writer_delay (200ms), which would dominate the latency shown.
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{Settings: map[string]string{"synchronous_commit": "on"}})
	if err != nil {
		return fmt.Errorf("start postgresql: %w", err)
	}
	defer cluster.Close()
	dbURL := cluster.URL("postgres")

	broker, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(4))
	if err != nil {
		return fmt.Errorf("start in-process kafka: %w", err)
	}
	defer broker.Close()
	fmt.Fprintf(out, "postgresql on 127.0.0.1:%d, kafka (kfake) on %s\n", cluster.Port(), broker.ListenAddrs()[0])

	if _, err := migrations.Up(ctx, dbURL, nil); err != nil {
		return err
	}
	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer db.Close(context.Background())
	if _, err := db.Exec(ctx, `CREATE TABLE orders (id text PRIMARY KEY, customer_id text NOT NULL,
		total numeric NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("create orders table: %w", err)
	}
	fmt.Fprintln(out, "migrated: outbox_events, processed_events, outbox_events_dead_letters, publication walrelay")

	// The relay runs as an application would embed it.
	level := slog.LevelWarn
	if opts.Verbose {
		level = slog.LevelInfo
	}
	snk, err := kafka.New(kafka.Config{Brokers: broker.ListenAddrs()})
	if err != nil {
		return err
	}
	defer snk.Close()
	cfg := relay.DefaultConfig()
	cfg.DatabaseURL = dbURL
	cfg.Sink = snk
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	r, err := relay.New(cfg)
	if err != nil {
		return err
	}
	relayCtx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan error, 1)
	go func() { relayDone <- r.Run(relayCtx) }()
	defer func() {
		stopRelay()
		<-relayDone
	}()

	consumer, err := kgo.NewClient(kgo.SeedBrokers(broker.ListenAddrs()...),
		kgo.ConsumeTopics("outbox.event.order"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AllowAutoTopicCreation(), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		return fmt.Errorf("kafka consumer: %w", err)
	}
	defer consumer.Close()

	commits := &commitLog{at: make(map[string]time.Time, opts.Events)}
	writeErr := make(chan error, 1)
	go func() { writeErr <- writeOrders(ctx, db, opts, commits) }()

	fmt.Fprintf(out, "writing %d orders (rate %s) and one rolled-back order; consuming outbox.event.order...\n",
		opts.Events, rateText(opts.Rate))
	rep, err := consume(ctx, consumer, opts, commits, writeErr)
	if err != nil {
		return err
	}
	rep.print(out)
	if rep.rolledBackSeen {
		return errors.New("the rolled-back order was published")
	}
	return nil
}

func rateText(rate float64) string {
	if rate == 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%g/s", rate)
}

// commitLog records when each event's transaction committed, as the writer saw it.
type commitLog struct {
	mu    sync.Mutex
	at    map[string]time.Time
	first time.Time
}

func (c *commitLog) add(id string, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.first.IsZero() {
		c.first = t
	}
	c.at[id] = t
}

func (c *commitLog) get(id string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.at[id]
	return t, ok
}

// writeOrders is the article's CreateOrder: the order row and its outbox event in
// one transaction. Halfway through, one order's transaction is rolled back.
func writeOrders(ctx context.Context, db *pgx.Conn, opts Options, commits *commitLog) error {
	var tick <-chan time.Time
	if opts.Rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / opts.Rate))
		defer t.Stop()
		tick = t.C
	}
	for i := 1; i <= opts.Events; i++ {
		if tick != nil {
			select {
			case <-tick:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		orderID := fmt.Sprintf("order-%06d", i)
		id, err := createOrder(ctx, db, orderID, fmt.Sprintf("customer-%d", i%7), float64(i)*9.99, false)
		if err != nil {
			return err
		}
		commits.add(id, time.Now())
		if i == (opts.Events+1)/2 {
			if _, err := createOrder(ctx, db, "order-rolled-back", "customer-0", 1, true); err != nil {
				return err
			}
		}
	}
	return nil
}

func createOrder(ctx context.Context, db *pgx.Conn, orderID, customer string, total float64, rollback bool) (string, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return "", fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "INSERT INTO orders (id, customer_id, total) VALUES ($1, $2, $3)", orderID, customer, total); err != nil {
		return "", fmt.Errorf("insert order: %w", err)
	}
	payload, err := json.Marshal(map[string]any{"order_id": orderID, "customer_id": customer, "total": total})
	if err != nil {
		return "", err
	}
	ev := outbox.Event{AggregateType: "order", AggregateID: orderID, EventType: "order.created", Payload: payload}
	if err := outbox.Write(ctx, tx, &ev); err != nil {
		return "", err
	}
	if rollback {
		return ev.ID, tx.Rollback(ctx)
	}
	return ev.ID, tx.Commit(ctx)
}

type report struct {
	events         int
	delivered      int
	duplicates     int
	rolledBackSeen bool
	latencies      []time.Duration
	first, last    time.Time
}

// consume reads until every written order arrived, printing the first ones.
func consume(ctx context.Context, cl *kgo.Client, opts Options, commits *commitLog, writeErr <-chan error) (*report, error) {
	rep := &report{events: opts.Events}
	seen := make(map[string]bool, opts.Events)
	var pending []*kgo.Record // consumed before the writer recorded their commit
	lastProgress := time.Now()
	deadline := time.Now().Add(time.Minute + time.Duration(float64(opts.Events)/max(opts.Rate, 1000)*float64(time.Second)))
	writing := true
	for rep.delivered < opts.Events || writing {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("timed out: %d of %d orders delivered; rerun with --verbose to see the relay's logs",
				rep.delivered, opts.Events)
		}
		select {
		case err := <-writeErr:
			if err != nil {
				return nil, fmt.Errorf("write orders: %w", err)
			}
			writing = false
		default:
		}
		pollCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fetches := cl.PollFetches(pollCtx)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		now := time.Now()
		fetches.EachRecord(func(rec *kgo.Record) { pending = append(pending, rec) })
		kept := pending[:0]
		for _, rec := range pending {
			id := header(rec, "id")
			if string(rec.Key) == "order-rolled-back" {
				rep.rolledBackSeen = true
				continue
			}
			committed, ok := commits.get(id)
			if !ok {
				kept = append(kept, rec)
				continue
			}
			if seen[id] {
				rep.duplicates++
				continue
			}
			seen[id] = true
			rep.delivered++
			lat := max(now.Sub(committed), 0)
			rep.latencies = append(rep.latencies, lat)
			if rep.first.IsZero() {
				rep.first = commits.first
			}
			rep.last = now
			if rep.delivered <= printedEvents {
				fmt.Fprintf(opts.Out, "  %-14s %-13s partition %d offset %-5d id %s  commit→consume %s\n",
					rec.Key, header(rec, "event_type"), rec.Partition, rec.Offset, id, lat.Round(10*time.Microsecond))
			}
		}
		pending = kept
		if rep.delivered > printedEvents && time.Since(lastProgress) > time.Second {
			fmt.Fprintf(opts.Out, "  ... %d of %d delivered\n", rep.delivered, opts.Events)
			lastProgress = time.Now()
		}
	}
	return rep, nil
}

func header(rec *kgo.Record, key string) string {
	for _, h := range rec.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func (r *report) print(out io.Writer) {
	slices.Sort(r.latencies)
	pct := func(p float64) time.Duration {
		return r.latencies[min(len(r.latencies)-1, int(p*float64(len(r.latencies))))].Round(10 * time.Microsecond)
	}
	took := r.last.Sub(r.first)
	fmt.Fprintln(out, "summary:")
	fmt.Fprintf(out, "  delivered %d of %d orders, %d duplicates, rolled-back order published: %v\n",
		r.delivered, r.events, r.duplicates, r.rolledBackSeen)
	if len(r.latencies) > 0 {
		fmt.Fprintf(out, "  commit→consume latency p50 %s, p99 %s, max %s\n", pct(0.50), pct(0.99), r.latencies[len(r.latencies)-1].Round(10*time.Microsecond))
	}
	if took > 0 {
		fmt.Fprintf(out, "  %.0f events/s from first commit to last consume (%s)\n", float64(r.delivered)/took.Seconds(), took.Round(time.Millisecond))
	}
}
