package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/outbox"
)

// WriteTx writes n events in one transaction and commits it (or rolls it back).
func WriteTx(t testing.TB, conn *pgx.Conn, aggregates []string, eventType string, n int, rollback bool) []outbox.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer tx.Rollback(context.Background())
	events := make([]outbox.Event, 0, n)
	for i := 0; i < n; i++ {
		agg := aggregates[i%len(aggregates)]
		ev := outbox.Event{AggregateType: "order", AggregateID: agg, EventType: eventType,
			Payload: []byte(fmt.Sprintf(`{"aggregate": %q, "n": %d}`, agg, i))}
		if err := outbox.Write(ctx, tx, &ev); err != nil {
			t.Fatalf("write event: %v", err)
		}
		events = append(events, ev)
	}
	if rollback {
		if err := tx.Rollback(ctx); err != nil {
			t.Fatalf("rollback: %v", err)
		}
		return events
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	return events
}

// SlotLSN returns the slot's confirmed_flush_lsn (0 when the slot does not exist).
func SlotLSN(t testing.TB, conn *pgx.Conn, slot string) pglogrepl.LSN {
	t.Helper()
	var s *string
	err := conn.QueryRow(context.Background(),
		"SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&s)
	if err == pgx.ErrNoRows || s == nil {
		return 0
	}
	if err != nil {
		t.Fatalf("read slot: %v", err)
	}
	lsn, err := pglogrepl.ParseLSN(*s)
	if err != nil {
		t.Fatalf("parse lsn: %v", err)
	}
	return lsn
}

// CurrentLSN returns pg_current_wal_lsn().
func CurrentLSN(t testing.TB, conn *pgx.Conn) pglogrepl.LSN {
	t.Helper()
	return walPosition(t, conn, "pg_current_wal_lsn")
}

// InsertLSN is the end of the WAL inserted so far: past every committed
// transaction, also where synchronous_commit=off leaves pg_current_wal_lsn (the
// write position) behind the last commit.
func InsertLSN(t testing.TB, conn *pgx.Conn) pglogrepl.LSN {
	t.Helper()
	return walPosition(t, conn, "pg_current_wal_insert_lsn")
}

// walPosition reads one of the server's WAL position functions.
func walPosition(t testing.TB, conn *pgx.Conn, fn string) pglogrepl.LSN {
	t.Helper()
	var s string
	if err := conn.QueryRow(context.Background(), "SELECT "+fn+"()::text").Scan(&s); err != nil {
		t.Fatalf("read %s: %v", fn, err)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		t.Fatalf("parse lsn: %v", err)
	}
	return lsn
}

// KeepWriting runs sql on conn every 50ms, to keep the WAL (and a slot's lag)
// growing, until the returned stop is called; a failing statement ends it.
func KeepWriting(conn *pgx.Conn, sql string) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := conn.Exec(context.Background(), sql); err != nil {
				return
			}
		}
	}()
	return func() { close(quit); <-done }
}
