package replication_test

import (
	"context"
	"testing"
	"time"

	"github.com/walrelay/walrelay/replication"
)

// Pause and Resume say whether they changed anything; Wait returns at once while
// running, at until while paused, and as soon as Resume is called.
func TestPauseWait(t *testing.T) {
	t.Parallel()
	var p replication.Pause
	ctx := context.Background()
	if !p.Wait(ctx, time.Now().Add(time.Hour)) {
		t.Fatal("Wait on a running stream reported it held")
	}
	if p.Resume() {
		t.Fatal("Resume of a running stream reported a change")
	}
	if !p.Pause() || p.Pause() || !p.Paused() {
		t.Fatal("Pause: want a change the first time only, and Paused after it")
	}
	if p.Wait(ctx, time.Now().Add(10*time.Millisecond)) {
		t.Fatal("Wait while paused reported the stream may read on before until")
	}
	done := make(chan bool)
	go func() { done <- p.Wait(ctx, time.Now().Add(time.Hour)) }()
	if !p.Resume() {
		t.Fatal("Resume of a paused stream reported no change")
	}
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("Wait returned false after the resume")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after the resume")
	}
	cctx, cancel := context.WithCancel(ctx)
	p.Pause()
	cancel()
	if p.Wait(cctx, time.Now().Add(time.Hour)) {
		t.Fatal("Wait with an ended context reported the stream may read on while paused")
	}
}
