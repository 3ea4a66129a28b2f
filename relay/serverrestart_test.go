package relay_test

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/walrelay/walrelay/internal/pgcluster"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/relay"
)

// The restart tests (make test-restart runs them with WALRELAY_RESTART=full: more
// rounds at a higher rate; the short version runs in make test) restart or crash the
// server under load while the relay streams through it, and count the events
// published more than once against the bound docs/guarantees.md states:
// (--progress-interval + --status-interval) × the event rate + the in-flight window.
// PostgreSQL saves a logical slot's confirmed position only now and then, so without
// the relay's own record of what it confirmed (walrelay_confirmed) a restart goes back
// to where the slot was last saved: many seconds of events.

// restartLoad is how a restart test loads the server: events per second, seconds of
// load before each restart, and restarts.
type restartLoad struct {
	rate   int
	perTx  int // events per transaction
	before time.Duration
	rounds int
}

func restartLoadFor() restartLoad {
	if os.Getenv("WALRELAY_RESTART") == "full" {
		return restartLoad{rate: 2000, perTx: 20, before: 8 * time.Second, rounds: 3}
	}
	return restartLoad{rate: 600, perTx: 10, before: 5 * time.Second, rounds: 1}
}

// restartMaxInFlight is the in-flight window of the restart tests' relays: small, so
// that the bound says something at a few hundred events per second.
const restartMaxInFlight = 500

// loadWriter writes transactions of perTx events at a steady rate to the server
// behind dbURL, reconnecting while it is down. Only events whose commit
// succeeded are kept: a commit cut off by the restart may or may not have happened.
type loadWriter struct {
	aggs  []string
	perTx int

	mu struct {
		sync.Mutex
		written []outbox.Event
	}
	stop chan struct{}
	done chan struct{}
}

func startLoad(t *testing.T, dbURL string, load restartLoad) *loadWriter {
	w := &loadWriter{aggs: aggregates("load", 8), perTx: load.perTx, stop: make(chan struct{}), done: make(chan struct{})}
	every := time.Second * time.Duration(load.perTx) / time.Duration(load.rate)
	go func() {
		defer close(w.done)
		var conn *pgx.Conn
		defer func() {
			if conn != nil {
				conn.Close(context.Background())
			}
		}()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			if conn == nil {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				c, err := pgx.Connect(ctx, dbURL)
				cancel()
				if err != nil {
					continue // the server is down: try at the next tick
				}
				conn = c
			}
			evs, err := w.writeTx(conn, n)
			if err != nil {
				conn.Close(context.Background())
				conn = nil
				continue
			}
			w.mu.Lock()
			w.mu.written = append(w.mu.written, evs...)
			w.mu.Unlock()
		}
	}()
	t.Cleanup(w.halt)
	return w
}

func (w *loadWriter) writeTx(conn *pgx.Conn, n int) ([]outbox.Event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.Background())
	evs := make([]outbox.Event, w.perTx)
	for i := range evs {
		evs[i] = outbox.Event{AggregateType: "order", AggregateID: w.aggs[(n+i)%len(w.aggs)], EventType: "load",
			Payload: []byte(`{"n": 1}`)}
		if err := outbox.Write(ctx, tx, &evs[i]); err != nil {
			return nil, err
		}
	}
	return evs, tx.Commit(ctx)
}

// halt stops writing; it may be called more than once.
func (w *loadWriter) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func (w *loadWriter) written() []outbox.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]outbox.Event(nil), w.mu.written...)
}

// restartRig is a relay streaming a server that a test restarts under load.
type restartRig struct {
	t        *testing.T
	writeURL string // where the load and markers are written (the primary)
	consumer *testenv.Consumer
	cfg      relay.Config
}

// restartRelay starts the relay of a restart test on dbURL (tweaks add to it).
func restartRelay(t *testing.T, dbURL string, broker *kfake.Cluster, tweak ...func(*config)) (*running, relay.Config) {
	var cfg relay.Config
	tweak = append([]func(*config){func(c *config) {
		c.MaxInFlightEvents = restartMaxInFlight
	}}, tweak...)
	tweak = append(tweak, func(c *config) { cfg = c.Config })
	return startWithBrokers(t, dbURL, broker.ListenAddrs(), "restart", tweak...), cfg
}

// measure runs the load, calls restart after load.before of it, goes on writing for
// a few seconds once the server is back, then waits for every event and counts
// repeats against the bound, failing the test on a breach or a loss.
func (r *restartRig) measure(what string, load restartLoad, restart func()) {
	t := r.t
	for round := 1; round <= load.rounds; round++ {
		w := startLoad(t, r.writeURL, load)
		began := time.Now()
		waitFor(t, load.before+time.Minute, what+": load before the restart", func() bool {
			return time.Since(began) >= load.before && len(w.written()) > 0
		})
		before, beforeTook := len(w.written()), time.Since(began)
		restart()
		back := len(w.written())
		waitFor(t, 2*time.Minute, what+": load after the restart", func() bool {
			return len(w.written()) >= back+load.rate*3
		})
		w.halt()
		took := time.Since(began)
		written := w.written()
		rate := float64(before) / beforeTook.Seconds()

		// One marker per aggregate, after the load: once each arrived, whatever the
		// relay published again before it on that aggregate's partition did too.
		conn := testenv.Connect(t, r.writeURL)
		markers := testenv.WriteTx(t, conn, aggregates("load", 8), "marker", 8, false)
		conn.Close(context.Background())
		if !r.consumer.WaitFor(3*time.Minute, func() bool {
			for _, ev := range append(written, markers...) {
				if r.consumer.Count(ev.ID) == 0 {
					return false
				}
			}
			return true
		}) {
			lost := 0
			for _, ev := range written {
				if r.consumer.Count(ev.ID) == 0 {
					lost++
				}
			}
			t.Fatalf("%s, round %d: %d of %d events written under load not delivered", what, round, lost, len(written))
		}
		repeats := 0
		for _, ev := range written {
			repeats += r.consumer.Count(ev.ID) - 1
		}
		window := r.cfg.ProgressInterval + r.cfg.StatusInterval
		// The bound takes the load's pace: the writer never goes faster, and where the
		// machine holds it back (the average below it) the relay lags the server too,
		// by events committed but not yet confirmed that the in-flight term counts.
		bound := int(window.Seconds()*float64(load.rate)) + r.cfg.MaxInFlightEvents
		t.Logf("%s, round %d: %d events over %s (%.0f/s on average before the restart), %d published again; "+
			"bound (%s + %s) × %d/s + %d = %d", what, round, len(written), took.Round(time.Millisecond), rate, repeats,
			r.cfg.ProgressInterval, r.cfg.StatusInterval, load.rate, r.cfg.MaxInFlightEvents, bound)
		if repeats > bound {
			t.Errorf("%s, round %d: %d events published again, more than the bound of %d", what, round, repeats, bound)
		}
	}
}

// serverRestartTest restarts (or crashes) a server of its own, on the binaries of
// binDir ("" for the default version), under load with the relay streaming through.
func serverRestartTest(t *testing.T, binDir string, crash bool) {
	load := restartLoadFor()
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pg, dbURL := ownCluster(t, binDir, nil)
	broker := testenv.Kafka(t)
	rn, cfg := restartRelay(t, dbURL, broker)
	if !rn.waitLog(time.Minute, "msg=streaming") {
		t.Fatal("the relay did not start streaming")
	}
	rig := &restartRig{t: t, writeURL: dbURL, consumer: testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`), cfg: cfg}
	what := "fast restart"
	if crash {
		what = "immediate restart (crash)"
	}
	what = "PostgreSQL " + strconv.Itoa(pg.ServerVersionNum()/10000) + ", " + what
	rig.measure(what, load, func() {
		stop := pg.Stop
		if crash {
			stop = pg.Crash
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		// After a crash the killed processes may hold the port or shared memory a
		// moment longer than the postmaster: start again until it takes.
		waitFor(t, time.Minute, "the server to start again", func() bool {
			err := pg.StartAgain(ctx)
			if err != nil {
				t.Logf("starting again: %v", err)
			}
			return err == nil
		})
	})
}

// A fast restart of the default server (Debian's 15), which before 17 does not save
// the slot's confirmed position at shutdown.
func TestFastServerRestartRepeatsWithinBound(t *testing.T) {
	serverRestartTest(t, "", false)
}

// An immediate restart of the default server: a crash of its processes (the
// throwaway clusters run with fsync off, so not a machine's).
func TestServerCrashRepeatsWithinBound(t *testing.T) {
	serverRestartTest(t, "", true)
}

// binDir17 is PostgreSQL 17's server, which saves the slot at a clean shutdown.
func binDir17(t *testing.T) string {
	binDir, err := pgcluster.BinDirFor("17")
	if err != nil {
		needBinaries(t, err)
	}
	return binDir
}

// An immediate restart of 17: after a crash its slot too is where it was last saved.
func TestServerCrashRepeatsWithinBoundOn17(t *testing.T) {
	serverRestartTest(t, binDir17(t), true)
}

// A fast restart of 17, which saves the slot's confirmed position at shutdown: the
// regression test of the server's own rule.
func TestFastServerRestartRepeatsWithinBoundOn17(t *testing.T) {
	serverRestartTest(t, binDir17(t), false)
}

// A fast restart of a standby that decodes (16+): its slot comes back where its last
// restartpoint saved it. The relay's record lives on the primary, whose WAL the
// standby replays, so its LSN means the same on both.
func TestDecodingStandbyRestartRepeatsWithinBound(t *testing.T) {
	load := restartLoadFor()
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	p := startStandbyPair(t, ctx, standbyBinaries(t))
	rn, cfg := restartRelay(t, p.standby.URL("postgres"), p.broker, func(c *config) { c.PrimaryURL = p.primary.URL("postgres") })
	if !rn.waitLog(2*time.Minute, "msg=streaming") {
		t.Fatal("the relay did not start streaming from the standby")
	}
	rig := &restartRig{t: t, writeURL: p.primary.URL("postgres"), consumer: p.consumer, cfg: cfg}
	rig.measure("PostgreSQL "+strconv.Itoa(p.standby.ServerVersionNum()/10000)+" standby that decodes, fast restart", load, func() {
		if err := p.standby.Stop(); err != nil {
			t.Fatal(err)
		}
		if err := p.standby.StartAgain(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
