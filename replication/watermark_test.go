package replication_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/replication"
)

func TestWatermarkConfirmsOnlySettledPrefix(t *testing.T) {
	w := replication.NewWatermark(replication.NewWindow(100, 1<<20), 10)

	w.Begin()
	a1 := w.Track(1)
	a2 := w.Track(1)
	w.Commit(100)
	w.Begin()
	b1 := w.Track(1)
	w.Commit(200)
	w.Begin()
	w.Commit(300) // no events: settled at once, but only after everything before it

	steps := []struct {
		name string
		do   func()
		want pglogrepl.LSN
	}{
		{"nothing acked", func() {}, 10},
		{"later transaction acked first", func() { b1.Done(1, nil) }, 10},
		{"first transaction half acked", func() { a1.Done(1, nil) }, 10},
		{"first transaction fully acked", func() { a2.Done(1, nil) }, 300},
	}
	for _, s := range steps {
		s.do()
		if got := w.Confirmable(); got != s.want {
			t.Fatalf("%s: confirmable %s, want %s", s.name, got, pglogrepl.LSN(s.want))
		}
	}
	if !w.Idle() {
		t.Fatal("not idle with everything settled")
	}
}

func TestWatermarkServerPosition(t *testing.T) {
	w := replication.NewWatermark(replication.NewWindow(100, 1<<20), 10)
	w.ServerPosition(50)
	if got := w.Confirmable(); got != 50 {
		t.Fatalf("idle: confirmable %s, want the server position 0/32", got)
	}
	w.Begin()
	ev := w.Track(1)
	w.ServerPosition(70) // inside an open transaction: not usable
	w.Commit(90)
	w.ServerPosition(95) // after the commit, but the transaction is unsettled
	if got := w.Confirmable(); got != 50 {
		t.Fatalf("unsettled: confirmable %s, want 0/32", got)
	}
	ev.Done(1, nil)
	if got := w.Confirmable(); got != 95 {
		t.Fatalf("settled: confirmable %s, want the later server position 0/5F", got)
	}
}

// EventsSettled follows the transactions with events only: an empty transaction or
// the server's position moves the confirmable LSN, never EventsSettled.
func TestWatermarkEventsSettled(t *testing.T) {
	w := replication.NewWatermark(replication.NewWindow(100, 1<<20), 10)
	w.Begin()
	w.Commit(40) // no events
	w.ServerPosition(60)
	if got := w.Confirmable(); got != 60 || w.EventsSettled() != 0 {
		t.Fatalf("idle: confirmable %s, events settled %s; want 0/3C and 0/0", got, w.EventsSettled())
	}
	w.Begin()
	ev := w.Track(1)
	w.Commit(90)
	w.Begin()
	w.Commit(120)
	w.Confirmable()
	if got := w.EventsSettled(); got != 0 {
		t.Fatalf("event not acked: events settled %s, want 0/0", got)
	}
	ev.Done(1, nil)
	w.ServerPosition(150)
	if got := w.Confirmable(); got != 150 || w.EventsSettled() != 90 {
		t.Fatalf("acked: confirmable %s, events settled %s; want 0/96 and 0/5A", got, w.EventsSettled())
	}
}

func TestWatermarkFailureHoldsTransaction(t *testing.T) {
	window := replication.NewWindow(100, 1<<20)
	w := replication.NewWatermark(window, 0)
	w.Begin()
	ev := w.Track(7)
	w.Commit(100)
	boom := errors.New("boom")
	ev.Done(7, boom)
	if got := w.Confirmable(); got != 0 {
		t.Fatalf("a failed event's transaction was confirmed (%s)", got)
	}
	if !errors.Is(w.Err(), boom) {
		t.Fatalf("Err() = %v, want boom", w.Err())
	}
	if events, bytes := window.InFlight(); events != 0 || bytes != 0 {
		t.Fatalf("failed event still holds the window: %d events, %d bytes", events, bytes)
	}
}

func TestWindowBoundsCountAndBytes(t *testing.T) {
	window := replication.NewWindow(2, 100)
	w := replication.NewWatermark(window, 0)
	w.Begin()
	if window.Full() {
		t.Fatal("empty window reports full")
	}
	big := w.Track(500) // larger than the byte bound: passes alone
	if !window.Full() {
		t.Fatal("window over its byte bound reports room")
	}
	if events, bytes := window.InFlight(); events != 1 || bytes != 500 {
		t.Fatalf("in flight with one big event: %d events, %d bytes, want 1, 500", events, bytes)
	}
	big.Done(500, nil)
	a := w.Track(1)
	w.Track(1)
	if !window.Full() {
		t.Fatal("window at its count bound reports room")
	}
	if events, bytes := window.InFlight(); events != 2 || bytes != 2 {
		t.Fatalf("in flight at the count bound: %d events, %d bytes, want 2 and 2", events, bytes)
	}
	if window.Wait(context.Background(), time.Now().Add(10*time.Millisecond)) {
		t.Fatal("Wait on a full window reported room with nothing settled")
	}
	go a.Done(1, nil)
	if !window.Wait(context.Background(), time.Now().Add(time.Minute)) {
		t.Fatal("settling an event did not end the wait with room")
	}
	if window.Full() {
		t.Fatal("window below its bounds reports full")
	}
}
