package relay

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walrelay/walrelay/sink"
)

// pingCounter is a sink at the unit's edge: only Ping is called, and counted.
type pingCounter struct {
	sink.Sink
	pings atomic.Int64
}

func (s *pingCounter) Ping(context.Context) error {
	s.pings.Add(1)
	return nil
}

// While an event is in flight its ack tells whether the broker answers: no probe is
// sent. Once it is answered, the next interval's probe goes out and its verdict
// reaches the watch.
func TestProbeWaitsWhileEventsAreInFlight(t *testing.T) {
	const every = 100 * time.Millisecond
	snk := &pingCounter{}
	r := &Relay{cfg: Config{Sink: snk, AckTimeout: time.Second, BrokerProbeInterval: every}, acks: newAckClock(time.Now())}
	inFlight := r.acks.sent()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	verdicts := make(chan probeVerdict)
	done := make(chan error, 1)
	go func() { done <- r.probeBroker(ctx, verdicts) }()

	sentAt := time.Now()
	select {
	case v := <-verdicts:
		t.Fatalf("a probe went out %s after an event was sent and while it was in flight: %+v", time.Since(sentAt), v)
	case <-time.After(5 * every): // the span the claim is about: five intervals in flight
	}
	if n := snk.pings.Load(); n != 0 {
		t.Fatalf("%d pings while an event was in flight, want none", n)
	}

	r.acks.answered(inFlight, nil)
	select {
	case v := <-verdicts:
		if v.err != nil || v.acked != 1 {
			t.Errorf("verdict %+v, want an answer counted after the one ack", v)
		}
	case <-time.After(10 * every):
		t.Fatal("no probe within ten intervals of the last event's ack")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("probeBroker: %v", err)
	}
}
