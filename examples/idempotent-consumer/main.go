// Command consumer is an example consumer of walrelay's order events: it counts
// order.created events per customer into order_totals, exactly once per event,
// with consumer.Run.
//
// The database needs processed_events (run `walrelay migrate` on it, or create the
// table as consumer.DefaultTable documents); the program creates order_totals
// itself.
//
//	go run ./examples/idempotent-consumer --database-url postgres://localhost/shop \
//	    --kafka-brokers localhost:9092 --group order-totals
//
// SIGINT or SIGTERM stops it after the record in hand, with the offsets of the
// processed records committed.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/consumer"
)

const schema = `CREATE TABLE IF NOT EXISTS order_totals (
    customer_id TEXT        PRIMARY KEY,
    orders      BIGINT      NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now()
)`

func main() {
	databaseURL := flag.String("database-url", os.Getenv("DATABASE_URL"), "PostgreSQL URL of the database holding processed_events and order_totals")
	brokers := flag.String("kafka-brokers", "localhost:9092", "comma-separated Kafka seed brokers")
	group := flag.String("group", "order-totals", "Kafka consumer group")
	topic := flag.String("topic", "outbox.event.order", "topic walrelay publishes order events to")
	flag.Parse()

	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, *databaseURL, strings.Split(*brokers, ","), *group, *topic); err != nil {
		log.Error("consumer stopped", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, databaseURL string, brokers []string, group, topic string) error {
	if databaseURL == "" {
		return errors.New("set --database-url (or DATABASE_URL)")
	}
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("database pool: %w", err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, schema); err != nil {
		return fmt.Errorf("create order_totals: %w", err)
	}

	client, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(),    // consumer.Run commits, after the database
		kgo.BlockRebalanceOnPoll(), // never commit partitions lost to a rebalance
	)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer client.CloseAllowingRebalance()

	log.Info("consuming", "topic", topic, "group", group)
	err = consumer.Run(ctx, consumer.Config{
		DB:     pool,
		Client: client,
		Handle: countOrder,
		Logger: log,
	})
	log.Info("stopped")
	return err
}

// countOrder adds one order to its customer's total, in the transaction that
// records the event id.
func countOrder(ctx context.Context, tx pgx.Tx, rec *kgo.Record) error {
	if header(rec, "event_type") != "order.created" {
		return nil // other order events: recorded as processed, nothing to count
	}
	var order struct {
		CustomerID string `json:"customer_id"`
	}
	if err := json.Unmarshal(rec.Value, &order); err != nil || order.CustomerID == "" {
		// Retrying cannot fix the payload: Run stops, and an operator decides.
		return fmt.Errorf("order.created payload %s has no customer_id (%v)", rec.Value, err)
	}
	_, err := tx.Exec(ctx, `INSERT INTO order_totals (customer_id, orders, updated_at) VALUES ($1, 1, $2)
		ON CONFLICT (customer_id) DO UPDATE SET orders = order_totals.orders + 1, updated_at = EXCLUDED.updated_at`,
		order.CustomerID, time.Now())
	if err != nil {
		return fmt.Errorf("count order for customer %s: %w", order.CustomerID, err)
	}
	return nil
}

func header(rec *kgo.Record, key string) string {
	for _, h := range rec.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
