package main_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
)

// TestCrashBeforeAcksLosesNothing streams single-event transactions while the
// broker refuses every write, then kills the relay with SIGKILL: however many status
// intervals passed, the slot's confirmed LSN must not reach past the first
// transaction the broker never acknowledged (docs/design.md invariant 1), and the
// next relay delivers every event. A relay that settled an event before its ack (at
// the hand-over, or by recycling what tracks it too early) confirms the refused
// transactions within a status interval, and the kill loses them.
func TestCrashBeforeAcksLosesNothing(t *testing.T) {
	t.Parallel()
	const statusInterval = 50 * time.Millisecond
	dbURL := testenv.MigratedDatabase(t)
	kafka := testenv.Kafka(t)
	brokers := kafka.ListenAddrs()
	slot := slotName(t, "")
	admin := testenv.Connect(t, dbURL)
	env := relayEnv(dbURL, brokers)
	args := []string{"run", "--slot", slot, "--status-interval", statusInterval.String()}

	first := startProc(t, "relay#1", env, args...)
	waitStreaming(t, admin, slot, first)
	consumer := testenv.NewConsumer(t, brokers, `outbox\..*`)
	wconn := testenv.Connect(t, dbURL)
	var written []outbox.Event
	// Rows only: each is settled through the path an ack settles (settle.go).
	write := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			written = append(written, testenv.WriteTx(t, wconn, []string{fmt.Sprintf("agg-%02d", i%10)}, "order.updated", 1, false)...)
		}
	}
	write(0, 50)
	if !consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("consumed %d of the %d events written before the broker refused writes", consumer.Distinct(), len(written))
	}

	fault := kafka.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotEnoughReplicas, Count: -1})
	write(50, 1)
	firstEnd := testenv.CurrentLSN(t, admin) // at or past the end of the first unacked transaction
	write(51, 299)
	lastEnd := testenv.CurrentLSN(t, admin)
	if err := fault.Wait(context.Background(), 1); err != nil {
		t.Fatalf("broker never refused a write: %v", err)
	}
	testenv.WaitFor(t, 30*time.Second, "the walsender to send every transaction", func() bool {
		return sentLSN(t, admin, slot) >= lastEnd
	})
	// Twenty status intervals with every transaction received: none may be confirmed.
	until := time.Now().Add(20 * statusInterval)
	for time.Now().Before(until) {
		if lsn := testenv.SlotLSN(t, admin, slot); lsn >= firstEnd {
			t.Fatalf("confirmed_flush_lsn %s passed the unacked transaction ending at or before %s", lsn, firstEnd)
		}
		if first.exited() {
			t.Fatalf("relay#1 exited while the broker refused writes:\n%s", first.output.String())
		}
		time.Sleep(statusInterval / 2) // sampling a state over time is the point here
	}
	first.signal(syscall.SIGKILL)
	if code := first.wait(10 * time.Second); code != -1 {
		t.Fatalf("relay#1 exited with code %d, want death by SIGKILL", code)
	}
	if lsn := testenv.SlotLSN(t, admin, slot); lsn >= firstEnd {
		t.Fatalf("confirmed_flush_lsn %s passed the unacked transaction ending at or before %s", lsn, firstEnd)
	}
	if n := consumer.Distinct(); n != 50 {
		t.Fatalf("%d events delivered while the broker refused writes", n-50)
	}

	fault.Remove()
	second := startProc(t, "relay#2", env, args...)
	if !consumer.WaitFor(90*time.Second, func() bool {
		for _, ev := range written {
			if consumer.Count(ev.ID) == 0 {
				return false
			}
		}
		return true
	}) {
		lost := 0
		for _, ev := range written {
			if consumer.Count(ev.ID) == 0 {
				lost++
			}
		}
		t.Fatalf("%d of %d committed events never delivered after the restart", lost, len(written))
	}
	second.stop(15 * time.Second)
}

// sentLSN is how far the walsender of slot has sent the WAL (0: none streams it).
func sentLSN(t *testing.T, conn *pgx.Conn, slot string) pglogrepl.LSN {
	t.Helper()
	var sent *string
	if err := conn.QueryRow(context.Background(), `SELECT r.sent_lsn::text FROM pg_stat_replication r
		JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = $1`, slot).Scan(&sent); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return 0
		}
		t.Fatal(err)
	}
	if sent == nil {
		return 0
	}
	lsn, err := pglogrepl.ParseLSN(*sent)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}
