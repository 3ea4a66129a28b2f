package relay_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/pgcluster"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/ops"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/relay"
)

// pairRounds is how many rounds of server restarts TestPairStandbyRestartIsNoPromotion
// runs: one by default (go test ./relay/), more with WALRELAY_PAIR=full (make
// test-standby), which also restarts an instance each round.
func pairRounds(t *testing.T) (rounds int, full bool) {
	switch v := os.Getenv("WALRELAY_PAIR"); v {
	case "":
		return 1, false
	case "full":
		return 5, true
	default:
		t.Fatalf("WALRELAY_PAIR=%q: want empty (short) or full", v)
		return 0, false
	}
}

// pairRig is a standby pair, a --database-url naming both servers that prefers the
// standby, two relay instances on it, and a watch that polls both instances and both
// servers every 50 ms for the pair's rules: at most one instance streams, at most
// one slot of the relay's name exists and at most one is active, and no instance
// stops for good.
type pairRig struct {
	t *testing.T
	*standbyPair
	url     string
	written []outbox.Event

	mu struct {
		sync.Mutex
		relays   [2]*running
		breaches []string
		promoted bool     // the standby was promoted: stopping with "was promoted" is expected
		stopped  []string // the errors of the instances that stopped so
	}
	stopWatch func()
}

func startPairRig(t *testing.T, ctx context.Context) *pairRig {
	t.Helper()
	r := &pairRig{t: t, standbyPair: startStandbyPair(t, ctx, standbyBinaries(t))}
	// The primary first: the standby is chosen by target_session_attrs, not by order.
	r.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=prefer-standby",
		r.primary.Port(), r.standby.Port())
	stop, done := make(chan struct{}), make(chan struct{})
	go r.watch(stop, done)
	r.stopWatch = func() {
		select {
		case <-stop:
		default:
			close(stop)
			<-done
		}
	}
	t.Cleanup(r.stopWatch)
	return r
}

// start starts instance i.
func (r *pairRig) start(i int) {
	r.t.Helper()
	rn := startWithBrokers(r.t, r.url, r.broker.ListenAddrs(), "walrelay", func(c *config) { c.ReconnectMax = time.Second })
	r.mu.Lock()
	r.mu.relays[i] = rn
	r.mu.Unlock()
}

// stop stops instance i; the watch no longer sees it.
func (r *pairRig) stop(i int) {
	r.t.Helper()
	r.mu.Lock()
	rn := r.mu.relays[i]
	r.mu.relays[i] = nil
	r.mu.Unlock()
	rn.stop()
}

// ready is instance i's /readyz answer.
func (r *pairRig) ready(i int) (bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rn := r.mu.relays[i]; rn != nil {
		return rn.relay.Ready()
	}
	return false, "not running"
}

// waiting says whether every running instance waits for its slot's server.
func (r *pairRig) waiting() bool {
	for i := range r.mu.relays {
		if _, why := r.ready(i); !strings.HasPrefix(why, "waiting:") {
			return false
		}
	}
	return true
}

// leader waits for the instance that streams.
func (r *pairRig) leader() int {
	r.t.Helper()
	leader := -1
	waitFor(r.t, time.Minute, "an instance to stream", func() bool {
		for i := range r.mu.relays {
			if _, why := r.ready(i); why == "streaming" {
				leader = i
				return true
			}
		}
		return false
	})
	return leader
}

func (r *pairRig) breach(format string, args ...any) {
	r.mu.breaches = append(r.mu.breaches, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
}

func (r *pairRig) breached() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.mu.breaches) > 0
}

// watch polls until stop closes.
func (r *pairRig) watch(stop, done chan struct{}) {
	defer close(done)
	servers := []*pgcluster.Cluster{r.primary, r.standby}
	conns := make([]*pgx.Conn, len(servers))
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close(context.Background())
			}
		}
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		slots, active := 0, 0
		var where []string
		for i, s := range servers {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if conns[i] == nil {
				conns[i], _ = pgx.Connect(ctx, s.URL("postgres"))
			}
			var n, a int
			if conns[i] != nil {
				err := conns[i].QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE active) FROM pg_replication_slots s
					WHERE slot_name = 'walrelay' AND NOT coalesce((to_jsonb(s)->>'synced')::bool, false)`).Scan(&n, &a)
				if err != nil {
					conns[i].Close(context.Background())
					conns[i] = nil
				}
			}
			cancel()
			slots, active = slots+n, active+a
			if n > 0 {
				where = append(where, fmt.Sprintf("%d on port %d (%d active)", n, s.Port(), a))
			}
		}
		r.mu.Lock()
		if slots > 1 || active > 1 {
			r.breach("slots of the relay's name: %s", strings.Join(where, ", "))
		}
		streaming := 0
		for i, rn := range r.mu.relays {
			if rn == nil {
				continue
			}
			select {
			case err, ok := <-rn.done:
				if !ok {
					break
				}
				close(rn.done) // stop sees it returned
				if r.mu.promoted && err != nil && strings.Contains(err.Error(), "was promoted") {
					r.mu.stopped = append(r.mu.stopped, err.Error())
				} else {
					r.breach("instance %d stopped for good: %v", i, err)
				}
			default:
			}
			if ok, why := rn.relay.Ready(); ok && why == "streaming" {
				streaming++
			}
		}
		if streaming > 1 {
			r.breach("%d instances stream at once", streaming)
		}
		r.mu.Unlock()
	}
}

// write commits n events on the primary.
func (r *pairRig) write(what string, n int) {
	r.t.Helper()
	r.written = append(r.written, testenv.WriteTx(r.t, r.onPrimary, aggregates(what, 5), what, n, false)...)
}

// delivered waits until every event written has arrived, failing at once on a breach.
func (r *pairRig) delivered(when string) {
	r.t.Helper()
	if !r.consumer.WaitFor(2*time.Minute, func() bool { return r.consumer.Distinct() >= len(r.written) || r.breached() }) {
		r.t.Fatalf("%s: %d of %d events delivered", when, r.consumer.Distinct(), len(r.written))
	}
	r.failOnBreaches(when)
}

func (r *pairRig) failOnBreaches(when string) {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.mu.breaches); n > 0 {
		r.t.Fatalf("%s: %d breaches of the pair's rules, the first:\n%s", when, n, strings.Join(r.mu.breaches[:min(n, 5)], "\n"))
	}
}

// confirmed waits until the standby's slot confirmed the primary's WAL up to now, so
// that what a restart then publishes again is the restart's doing alone.
func (r *pairRig) confirmed() {
	r.t.Helper()
	target := testenv.CurrentLSN(r.t, r.onPrimary)
	waitFor(r.t, time.Minute, "the slot to confirm "+target.String(), func() bool {
		return testenv.SlotLSN(r.t, r.onStandby, "walrelay") >= target
	})
}

// restartStandby stops the standby, runs while, and starts it again.
func (r *pairRig) restartStandby(ctx context.Context, while func()) {
	r.t.Helper()
	if err := r.standby.Stop(); err != nil {
		r.t.Fatal(err)
	}
	while()
	if err := r.standby.StartAgain(ctx); err != nil {
		r.t.Fatal(err)
	}
	r.onStandby = testenv.Connect(r.t, r.standby.URL("postgres"))
}

// slotsOn counts the slots of the relay's name on conn's server.
func slotsOn(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'walrelay'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// finish checks the end state: no breach, the one slot on the standby, every event
// delivered.
func (r *pairRig) finish() {
	r.t.Helper()
	r.stopWatch()
	r.failOnBreaches("at the end")
	if n := slotsOn(r.t, r.onPrimary); n != 0 {
		r.t.Errorf("the primary has %d slots of the relay's name, want none: the slot is on the standby", n)
	}
	if n := slotsOn(r.t, r.onStandby); n != 1 {
		r.t.Errorf("the standby has %d slots of the relay's name, want 1", n)
	}
	again := map[string]int{} // events delivered more than once, by the phase that wrote them
	for _, ev := range r.written {
		if n := r.consumer.Count(ev.ID); n == 0 {
			r.t.Errorf("event %s (%s) lost", ev.ID, ev.EventType)
		} else if n > 1 {
			again[ev.EventType]++
		}
	}
	r.t.Logf("%d events written, %d records delivered; delivered again, by phase: %v", len(r.written),
		len(r.consumer.Records), again)
}

// Two instances restarted while the standby is down: the slot is on the standby,
// and neither creates one of the relay's name on the primary (which an orphan would
// keep WAL for once the standby is back). Both wait, saying why in /readyz, and
// stream from the standby's slot once it is back; nothing is lost.
func TestPairRestartWhileStandbyDownMakesNoSecondSlot(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := startPairRig(t, ctx)
	r.start(0)
	r.start(1)
	r.write("first", 50)
	r.delivered("the first start")

	r.stop(0)
	r.stop(1)
	r.restartStandby(ctx, func() {
		r.start(0)
		r.start(1)
		r.write("standby-down", 50)
		waitFor(t, time.Minute, "both instances to wait for the standby, or a slot on the primary", func() bool {
			return r.waiting() || slotsOn(t, r.onPrimary) > 0
		})
		if n := slotsOn(t, r.onPrimary); n > 0 {
			t.Fatalf("restarted while the standby was down, the relay created %d slots of its name on the primary", n)
		}
		if _, why := r.ready(0); !strings.Contains(why, "does not answer") || !strings.Contains(why, fmt.Sprint(r.standby.Port())) {
			t.Errorf("/readyz while the standby is down: %q, want it to name the standby that does not answer", why)
		}
		cfg := relay.DefaultConfig()
		cfg.DatabaseURL = r.url
		st, err := ops.ReadStatus(ctx, cfg, ops.StatusLimits{})
		if err != nil {
			t.Fatal(err)
		}
		if code := ops.StatusExitCode(st.Problems); code != 4 || !strings.Contains(fmt.Sprint(st.Problems), "does not answer") {
			t.Errorf("status while the standby is down: exit %d, problems %v; want 4 and the standby that does not answer",
				code, st.Problems)
		}
	})
	r.write("standby-back", 50)
	r.delivered("the standby back")
	r.finish()
}

// A restart of the standby the slot is on (it comes back still in recovery, on the
// same timeline) is no promotion: no instance stops, both wait for it and go on.
// Then a restart of the primary, where the bookkeeping is. At most one instance
// streams at every observation, and nothing is lost.
func TestPairStandbyRestartIsNoPromotion(t *testing.T) {
	t.Parallel()
	rounds, full := pairRounds(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(3+2*rounds)*time.Minute)
	defer cancel()
	r := startPairRig(t, ctx)
	r.start(0)
	r.start(1)
	r.write("first", 50)
	r.delivered("the first start")

	for round := range rounds {
		r.confirmed()
		r.restartStandby(ctx, func() {
			r.write(fmt.Sprintf("standby-down-%d", round), 50)
			waitFor(t, time.Minute, "both instances to wait for the standby, or one to stop", func() bool {
				return r.waiting() || r.breached()
			})
			r.failOnBreaches("the standby down")
		})
		r.write(fmt.Sprintf("standby-back-%d", round), 50)
		r.delivered("the standby back")

		r.confirmed()
		if err := r.primary.Stop(); err != nil {
			t.Fatal(err)
		}
		if err := r.primary.StartAgain(ctx); err != nil {
			t.Fatal(err)
		}
		r.onPrimary = testenv.Connect(t, r.primary.URL("postgres"))
		r.write(fmt.Sprintf("primary-back-%d", round), 50)
		r.delivered("the primary back")

		if full { // and the leader: the other takes over
			i := r.leader()
			r.stop(i)
			r.write(fmt.Sprintf("leader-down-%d", round), 50)
			r.delivered("the leader stopped")
			r.start(i)
			waitFor(t, time.Minute, "the restarted instance to stand by", func() bool {
				_, why := r.ready(i)
				return strings.HasPrefix(why, "standby:")
			})
		}
	}
	r.finish()
}

// An instance started while the standby is down, and another once it is back:
// they never stream at once, on whichever servers, and there is one slot. Before,
// the first decoded on the primary and the second on the standby, each leading on
// its own server.
func TestPairNeverTwoLeaders(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := startPairRig(t, ctx)
	r.restartStandby(ctx, func() {
		r.start(0)
		waitFor(t, time.Minute, "the instance to wait for the standby, or to stream", func() bool {
			ok, why := r.ready(0)
			return ok || strings.HasPrefix(why, "waiting:")
		})
	})
	r.start(1)
	r.write("both", 50)
	r.delivered("both instances up")
	waitFor(t, time.Minute, "one instance to stream and the other to stand by, or a breach", func() bool {
		_, a := r.ready(0)
		_, b := r.ready(1)
		return r.breached() || a == "streaming" && strings.HasPrefix(b, "standby:") || b == "streaming" && strings.HasPrefix(a, "standby:")
	})
	r.write("settled", 50)
	r.delivered("settled")
	r.finish()
}

// The standby the slot is on is promoted after the primary is lost: the instances
// stop, saying so (their bookkeeping went to the old primary), and started again they
// decode on the promoted server, where the slot is, with their bookkeeping there too,
// although the URL prefers a standby. Nothing is lost.
func TestPairPromotedStandbyKeepsTheSlot(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := startPairRig(t, ctx)
	r.start(0)
	r.start(1)
	r.write("first", 50)
	r.delivered("the first start")
	r.confirmed()

	r.mu.Lock()
	r.mu.promoted = true
	r.mu.Unlock()
	if err := r.primary.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := r.standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "both instances to stop, saying the standby was promoted", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.mu.stopped) == 2 || len(r.mu.breaches) > 0
	})
	r.failOnBreaches("the promotion")
	r.stop(0)
	r.stop(1)

	r.onPrimary = r.onStandby // the promoted server takes the writes
	r.start(0)
	r.start(1)
	r.write("promoted", 50)
	r.delivered("started again on the promoted server")
	r.stopWatch()
	r.failOnBreaches("at the end")
	if n := slotsOn(t, r.onStandby); n != 1 {
		t.Errorf("the promoted server has %d slots of the relay's name, want 1", n)
	}
	for _, ev := range r.written {
		if r.consumer.Count(ev.ID) == 0 {
			t.Errorf("event %s (%s) lost", ev.ID, ev.EventType)
		}
	}
	r.mu.Lock()
	logs := r.mu.relays[0].logs.String() + r.mu.relays[1].logs.String()
	r.mu.Unlock()
	if strings.Contains(logs, "created replication slot") {
		t.Error("an instance created the slot again; the promoted server kept it")
	}
	t.Logf("%d events written, %d records delivered", len(r.written), len(r.consumer.Records))
}
