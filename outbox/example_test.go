package outbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
)

// exampleDB is a migrated database for the example, opened in TestMain; exampleURL
// is its URL.
var (
	exampleDB  *sql.DB
	exampleURL string
)

func TestMain(m *testing.M) {
	url, err := testenv.NewMigratedDatabase()
	if err != nil {
		// No silent skip: the example is the package's test.
		fmt.Fprintln(os.Stderr, "outbox tests need PostgreSQL:", err)
		os.Exit(1)
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		log.Fatal(err)
	}
	exampleDB, exampleURL = db, url
	if _, err := db.Exec(`CREATE TABLE orders (id text PRIMARY KEY, customer_id text NOT NULL,
		total numeric NOT NULL, created_at timestamptz NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	code := testenv.Main(m)
	db.Close()
	os.Exit(code)
}

type Order struct {
	ID         string
	CustomerID string
	Total      float64
}

type OrderService struct{ db *sql.DB }

// CreateOrder is the article's CreateOrder: the order and its event commit together,
// and nothing is published from here.
func (s *OrderService) CreateOrder(ctx context.Context, order Order) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin tx: %w", err)
	}
	defer tx.Rollback()

	if _, err := tx.ExecContext(ctx,
		`INSERT INTO orders (id, customer_id, total, created_at) VALUES ($1, $2, $3, NOW())`,
		order.ID, order.CustomerID, order.Total); err != nil {
		return fmt.Errorf("insert order: %w", err)
	}
	payload, err := json.Marshal(map[string]any{
		"order_id": order.ID, "customer_id": order.CustomerID, "total": order.Total,
	})
	if err != nil {
		return fmt.Errorf("marshal payload: %w", err)
	}
	ev := outbox.Event{AggregateType: "order", AggregateID: order.ID, EventType: "order.created", Payload: payload}
	if err := outbox.WriteSQL(ctx, tx, &ev); err != nil {
		return err
	}
	return tx.Commit()
}

func Example() {
	ctx := context.Background()
	svc := &OrderService{db: exampleDB}
	if err := svc.CreateOrder(ctx, Order{ID: "o-1", CustomerID: "c-1", Total: 42.5}); err != nil {
		log.Fatal(err)
	}
	var eventType, aggregateID string
	var total float64
	if err := exampleDB.QueryRowContext(ctx,
		`SELECT event_type, aggregate_id, (payload->>'total')::float8 FROM outbox_events WHERE aggregate_id = 'o-1'`,
	).Scan(&eventType, &aggregateID, &total); err != nil {
		log.Fatal(err)
	}
	fmt.Println(eventType, aggregateID, total)
	// Output: order.created o-1 42.5
}
