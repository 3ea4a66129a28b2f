package consumer_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/walrelay/walrelay/consumer"
	"github.com/walrelay/walrelay/internal/testenv"
)

// txRunner runs one transaction through Once or OnceSQL and commits it when Once
// returned no error, rolling it back otherwise, as the caller is told to.
type txRunner func(t *testing.T, d consumer.Dedup, id string, fn func(ctx context.Context) error) (bool, error)

func pgxRunner(conn *pgx.Conn) txRunner {
	return func(t *testing.T, d consumer.Dedup, id string, fn func(ctx context.Context) error) (bool, error) {
		ctx := context.Background()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ran, err := d.Once(ctx, tx, id, fn)
		if err != nil {
			if rerr := tx.Rollback(ctx); rerr != nil {
				t.Fatal(rerr)
			}
			return ran, err
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return ran, nil
	}
}

func sqlRunner(db *sql.DB) txRunner {
	return func(t *testing.T, d consumer.Dedup, id string, fn func(ctx context.Context) error) (bool, error) {
		ctx := context.Background()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		ran, err := d.OnceSQL(ctx, tx, id, fn)
		if err != nil {
			if rerr := tx.Rollback(); rerr != nil {
				t.Fatal(rerr)
			}
			return ran, err
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		return ran, nil
	}
}

func TestOnce(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `CREATE SCHEMA app;
		CREATE TABLE app.dedup (event_id uuid PRIMARY KEY, processed_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	recorded := func(t *testing.T, table, id string) bool {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE event_id = $1", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}

	for _, tc := range []struct {
		name  string
		run   txRunner
		dedup consumer.Dedup
		table string
	}{
		{"pgx", pgxRunner(conn), consumer.Dedup{}, "processed_events"},
		{"database/sql", sqlRunner(db), consumer.Dedup{}, "processed_events"},
		{"pgx custom table", pgxRunner(conn), consumer.Dedup{Table: "app.dedup"}, "app.dedup"},
		{"database/sql custom table", sqlRunner(db), consumer.Dedup{Table: "app.dedup"}, "app.dedup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := newUUID()
			calls := 0
			boom := errors.New("boom")

			// fn fails: the error comes back unchanged, the rollback leaves no id.
			ran, err := tc.run(t, tc.dedup, id, func(context.Context) error { calls++; return boom })
			if ran || !errors.Is(err, boom) {
				t.Fatalf("failing fn: (%v, %v), want (false, boom)", ran, err)
			}
			if recorded(t, tc.table, id) {
				t.Fatal("a failed fn left its event id recorded")
			}
			// The retry runs fn and records the id.
			ran, err = tc.run(t, tc.dedup, id, func(context.Context) error { calls++; return nil })
			if !ran || err != nil {
				t.Fatalf("retry: (%v, %v), want (true, nil)", ran, err)
			}
			if !recorded(t, tc.table, id) {
				t.Fatal("the event id was not recorded after fn succeeded")
			}
			// A duplicate does not run fn.
			ran, err = tc.run(t, tc.dedup, id, func(context.Context) error { calls++; return nil })
			if ran || err != nil {
				t.Fatalf("duplicate: (%v, %v), want (false, nil)", ran, err)
			}
			if calls != 2 {
				t.Errorf("fn ran %d times, want 2 (the failure and the retry)", calls)
			}
		})
	}

	t.Run("invalid ids", func(t *testing.T) {
		for _, id := range []string{"", "not-a-uuid", "123"} {
			for name, run := range map[string]txRunner{"pgx": pgxRunner(conn), "sql": sqlRunner(db)} {
				ran, err := run(t, consumer.Dedup{}, id, func(context.Context) error {
					t.Fatalf("%s: fn ran for id %q", name, id)
					return nil
				})
				if ran || !errors.Is(err, consumer.ErrInvalidEventID) {
					t.Errorf("%s: id %q: (%v, %v), want ErrInvalidEventID", name, id, ran, err)
				}
			}
		}
	})

	t.Run("missing table", func(t *testing.T) {
		_, err := pgxRunner(conn)(t, consumer.Dedup{Table: "nope"}, newUUID(), nil)
		if err == nil || !strings.Contains(err.Error(), "walrelay migrate") {
			t.Errorf("missing dedup table: %v, want advice to run walrelay migrate", err)
		}
	})
}

// Two transactions on one id: the second waits for the first, then sees a
// duplicate if the first committed, or runs fn if it rolled back.
func TestOnceConcurrent(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	ctx := context.Background()
	for _, commitFirst := range []bool{true, false} {
		first, second, watch := testenv.Connect(t, dbURL), testenv.Connect(t, dbURL), testenv.Connect(t, dbURL)
		id := newUUID()
		tx1, err := first.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ran, err := consumer.Once(ctx, tx1, id, nil); !ran || err != nil {
			t.Fatalf("first: (%v, %v)", ran, err)
		}
		secondPID := second.PgConn().PID()
		type result struct {
			ran bool
			err error
		}
		res := make(chan result, 1)
		go func() {
			tx2, err := second.Begin(ctx)
			if err != nil {
				res <- result{err: err}
				return
			}
			defer tx2.Rollback(ctx)
			ran, err := consumer.Once(ctx, tx2, id, nil)
			if err == nil {
				err = tx2.Commit(ctx)
			}
			res <- result{ran, err}
		}()
		// The second transaction is blocked on the first one's row lock.
		deadline := time.Now().Add(10 * time.Second)
		for {
			var waiting bool
			if err := watch.QueryRow(ctx, `SELECT coalesce(wait_event_type = 'Lock', false)
				FROM pg_stat_activity WHERE pid = $1`, int64(secondPID)).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
			if waiting {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the second transaction never waited for the first")
			}
			time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
		}
		if commitFirst {
			err = tx1.Commit(ctx)
		} else {
			err = tx1.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		r := <-res
		if r.err != nil || r.ran == commitFirst {
			t.Errorf("first committed=%v: second got (%v, %v), want (%v, nil)", commitFirst, r.ran, r.err, !commitFirst)
		}
	}
}
