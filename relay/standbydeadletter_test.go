package relay_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/relay"
)

// primaryBehind is a poller.Lag: the primary has not made one row's transaction
// visible yet, though the standby replayed it. The bookkeeping does not see the row
// until it has asked whether that transaction is finished, and the first answer is
// no: a settlement that waits for the transaction sees the row on its next look-up,
// one that does not ask never does.
type primaryBehind struct {
	id string
	mu struct {
		sync.Mutex
		asked  bool // the bookkeeper asked about the transaction: visible from now on
		hidden int  // look-ups the row was hidden from
	}
}

func (l *primaryBehind) Hidden(o *poller.Outcome) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if o.Event.ID != l.id || l.mu.asked {
		return false
	}
	l.mu.hidden++
	return true
}

func (l *primaryBehind) Unfinished(o *poller.Outcome) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if o.Event.ID != l.id || l.mu.asked {
		return false
	}
	l.mu.asked = true
	return true
}

func (l *primaryBehind) hiddenCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.hidden
}

// The catch-up pass of a slot on a standby reads the rows there, and the standby can
// show a committed row before the primary, where the bookkeeping writes, does. An
// unmappable row the primary does not see yet (a fault-injected lag on the
// bookkeeping, on a real primary and standby) is not settled as gone: its dead
// letter is written once the primary sees its transaction, and with --on-publish
// progress it does not count as published once a horizon passes it.
func TestStandbyPassDeadLetterUnseenByThePrimaryIsWritten(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	p := startStandbyPair(t, ctx, standbyBinaries(t))

	var badID string
	if err := p.onPrimary.QueryRow(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload, created_at)
		VALUES ('order', 'bad', 'odd', '{}', 'infinity') RETURNING id::text`).Scan(&badID); err != nil {
		t.Fatal(err)
	}
	written := testenv.WriteTx(t, p.onPrimary, aggregates("b", 2), "before", 10, false)
	waitReplayed(t, ctx, p.onPrimary, p.onStandby)

	lag := &primaryBehind{id: badID}
	rn := startWithBrokers(t, p.standby.URL("postgres"), p.broker.ListenAddrs(), "walrelay", func(c *config) {
		c.PrimaryURL = p.primary.URL("postgres")
		c.OnPublish = poller.Progress
		c.ProgressInterval = 100 * time.Millisecond
		relay.SetBookkeepingLag(&c.Config, lag)
	})
	if !rn.waitLog(2*time.Minute, "catch-up pass done") {
		t.Fatalf("the catch-up pass did not finish:\n%s", rn.logs.String())
	}
	if lag.hiddenCount() == 0 {
		t.Fatal("the fault never fired: the bookkeeping looked the unmappable row up without the lag")
	}
	// The pass waited for every settlement: the dead letter is committed by now.
	var dead bool
	if err := p.onPrimary.QueryRow(ctx, "SELECT dead_lettered_at IS NOT NULL FROM outbox_events WHERE id = $1",
		badID).Scan(&dead); err != nil {
		t.Fatal(err)
	}
	if !dead {
		t.Errorf("the unmappable row the primary did not see at first is no dead letter after the pass "+
			"(looked up %d times while hidden)", lag.hiddenCount())
	}
	if !p.consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("%d of %d events delivered", p.consumer.Distinct(), len(written))
	}
	// Once a horizon passes the row, it is published only if it is no dead letter.
	waitFor(t, time.Minute, "a published horizon above the unmappable row", func() bool {
		var above bool
		err := p.onPrimary.QueryRow(ctx, `SELECT coalesce(walrelay_horizon('outbox_events'::regclass), 0) >
			walrelay_full_xid(xmin, walrelay_next_xid()) FROM outbox_events WHERE id = $1`, badID).Scan(&above)
		return err == nil && above
	})
	var pending bool
	if err := p.onPrimary.QueryRow(ctx, "SELECT "+unpublished("outbox_events")+" FROM outbox_events WHERE id = $1",
		badID).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if !pending {
		t.Error("the unmappable row counts as published (--on-publish progress), though it never became an event")
	}
	if strings.Contains(rn.logs.String(), "deleted by the application?") {
		t.Error("the relay took the row the primary did not see yet for a deleted one")
	}
}
