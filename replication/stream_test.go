package replication_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/replication"
)

// settleAll is a stream handler that settles each insert as it arrives and counts
// them.
type settleAll struct {
	wm      *replication.Watermark
	inserts atomic.Int64
	end     atomic.Uint64 // of the last transaction
}

func (h *settleAll) HandleWAL(_ context.Context, data []byte) error {
	msg, err := pglogrepl.Parse(data)
	if err != nil {
		return err
	}
	switch m := msg.(type) {
	case *pglogrepl.BeginMessage:
		h.wm.Begin()
	case *pglogrepl.InsertMessage:
		h.wm.Track(1).Done(1, nil)
		h.inserts.Add(1)
	case *pglogrepl.CommitMessage:
		h.wm.Commit(m.TransactionEndLSN)
		h.end.Store(uint64(m.TransactionEndLSN))
	}
	return nil
}

func (h *settleAll) Tick(context.Context) error  { return nil }
func (h *settleAll) Drain(context.Context) error { return nil }

// newSlot makes a database of the test's own with a publication and a slot, both
// named name, for the test to stream; rc is closed when the test ends.
func newSlot(ctx context.Context, t *testing.T, name string) (string, *pgx.Conn, *replication.Conn, replication.SlotCreation) {
	t.Helper()
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	if _, err := conn.Exec(ctx, "CREATE PUBLICATION "+name+" FOR TABLE outbox_events"); err != nil {
		t.Fatal(err)
	}
	rc, err := replication.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	created, err := rc.CreateSlot(ctx, name, false)
	if err != nil {
		t.Fatal(err)
	}
	return dbURL, conn, rc, created
}

// The check before a confirmation (the table watch's catalog query) runs beside the
// reads: while one is held up, the stream goes on reading and settling, and confirms
// nothing; once it passes, the stream confirms what it allows and, through later
// checks, the rest.
func TestReadsGoOnWhileTheConfirmCheckRuns(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, conn, rc, created := newSlot(ctx, t, "checked")
	start := testenv.SlotLSN(t, conn, "checked")

	checking := make(chan struct{}, 1)
	release := make(chan struct{})
	h := &settleAll{wm: replication.NewWatermark(replication.NewWindow(1000, 1<<20), created.ConsistentPoint)}
	streamCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- rc.Stream(streamCtx, replication.StreamConfig{
			Slot: "checked", Publication: "checked", StatusInterval: 20 * time.Millisecond,
			KeepaliveInterval: time.Second, ShutdownTimeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler),
			BeforeConfirm: func(ctx context.Context) error {
				select {
				case checking <- struct{}{}:
				default:
				}
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			},
		}, h.wm, h)
	}()

	testenv.WriteTx(t, conn, []string{"a"}, "first", 1, false)
	select {
	case <-checking: // a check for the first transaction runs, and is held up
	case err := <-done:
		t.Fatalf("the stream ended: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("no check started after the first transaction")
	}
	for range 5 {
		testenv.WriteTx(t, conn, []string{"b"}, "later", 1, false)
	}
	testenv.WaitFor(t, 30*time.Second, "the stream to read on while the check is held up", func() bool {
		return h.inserts.Load() == 6
	})
	if got := testenv.SlotLSN(t, conn, "checked"); got != start {
		t.Fatalf("the slot confirmed %s while the check was held up, want it at %s", got, start)
	}

	close(release)
	end := pglogrepl.LSN(h.end.Load())
	testenv.WaitFor(t, 30*time.Second, "the slot to confirm the transactions once the checks pass", func() bool {
		return testenv.SlotLSN(t, conn, "checked") >= end
	})
	stop()
	if err := <-done; err != nil {
		t.Fatalf("stream: %v", err)
	}
}

// tickCounter settles every insert, like settleAll, and counts the status intervals
// (Tick) and where the first transaction after a warm-up ended.
type tickCounter struct {
	settleAll
	ticks      atomic.Int64
	markerEnd  atomic.Uint64 // end LSN of the marker transaction, once seen
	markerTick atomic.Int64  // ticks when its commit arrived
}

func (h *tickCounter) HandleWAL(ctx context.Context, data []byte) error {
	if err := h.settleAll.HandleWAL(ctx, data); err != nil {
		return err
	}
	if data[0] == 'C' && h.inserts.Load() >= 5 && h.markerEnd.Load() == 0 {
		h.markerTick.Store(h.ticks.Load())
		h.markerEnd.Store(h.end.Load())
	}
	return nil
}

func (h *tickCounter) Tick(context.Context) error { h.ticks.Add(1); return nil }

// What a crash repeats is what was delivered past the confirmed LSN, so a
// transaction is confirmed as soon as the check that allows it passed: within the
// status interval that started the check, not at the next one.
func TestConfirmsAsSoonAsTheCheckPasses(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dbURL, _, rc, created := newSlot(ctx, t, "prompt")

	h := &tickCounter{settleAll: settleAll{wm: replication.NewWatermark(replication.NewWindow(1000, 1<<20), created.ConsistentPoint)}}
	var confirmTick atomic.Int64 // ticks when the marker's end was first confirmed; -1 until then
	confirmTick.Store(-1)
	streamCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- rc.Stream(streamCtx, replication.StreamConfig{
			Slot: "prompt", Publication: "prompt", StatusInterval: time.Second,
			KeepaliveInterval: 10 * time.Second, ShutdownTimeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler),
			BeforeConfirm: func(context.Context) error { return nil },
			OnConfirm: func(lsn pglogrepl.LSN) {
				if end := h.markerEnd.Load(); end != 0 && uint64(lsn) >= end && confirmTick.Load() < 0 {
					confirmTick.Store(h.ticks.Load())
				}
			},
		}, h.wm, h)
	}()

	// A steady trickle of transactions, as under load: the stream reads all the time.
	writer := testenv.Connect(t, dbURL)
	testenv.WaitFor(t, time.Minute, "the marker transaction to be confirmed", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the stream ended: %v", err)
		default:
		}
		if _, err := writer.Exec(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
			VALUES ('order', 'o-1', 'tick', '{}')`); err != nil {
			t.Fatal(err)
		}
		return confirmTick.Load() >= 0
	})
	if got, at := confirmTick.Load(), h.markerTick.Load(); got > at+1 {
		t.Errorf("the marker transaction, received in status interval %d, was confirmed in interval %d: "+
			"the confirmation waited for the status interval after the one whose check allowed it", at, got)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("stream: %v", err)
	}
}
