package relay_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/walrelay/walrelay/internal/pgcluster"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/kafka"
)

// standbyBinaries picks the server for the decoding-on-a-standby tests.
func standbyBinaries(t testing.TB) string {
	t.Helper()
	binDir, err := pgcluster.BinDirAtLeast(relay.StandbyDecodingMajor)
	if err != nil {
		needBinaries(t, err)
	}
	return binDir
}

// standbyPair is a primary (migrated) with a hot standby streaming from it, a
// connection to each, and a Kafka-protocol broker with a consumer of the outbox's
// topics: what every test of a relay on a standby starts from.
type standbyPair struct {
	primary, standby     *pgcluster.Cluster
	onPrimary, onStandby *pgx.Conn
	broker               *kfake.Cluster
	consumer             *testenv.Consumer
}

// startStandbyPair starts a standby pair on the server binaries in binDir; the
// test's cleanup stops it.
func startStandbyPair(t testing.TB, ctx context.Context, binDir string) *standbyPair {
	t.Helper()
	primary, standby, _ := primaryWithStandby(t, ctx, binDir, nil)
	broker := testenv.Kafka(t)
	return &standbyPair{
		primary: primary, standby: standby,
		onPrimary: testenv.Connect(t, primary.URL("postgres")), onStandby: testenv.Connect(t, standby.URL("postgres")),
		broker: broker, consumer: testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`),
	}
}

// refusal runs a relay that must refuse to start and returns its error.
func refusal(t *testing.T, rn *running) error {
	t.Helper()
	select {
	case err := <-rn.done:
		close(rn.done)
		return err
	case <-time.After(time.Minute):
		t.Fatal("the relay did not refuse to start within a minute")
		return nil
	}
}

// Decoding on a hot standby (PostgreSQL 16+): the slot is created and streamed on
// the standby, the bookkeeping goes to the primary. Rows committed on the primary
// before the slot existed (the catch-up pass, through the standby's snapshot),
// while streaming, and while the relay was stopped all arrive once; the slot is on
// the standby only, and walrelay's records are on the primary.
func TestDecodingOnStandby(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	p := startStandbyPair(t, ctx, standbyBinaries(t))

	// Without --primary-url a standby is refused, naming the setting.
	err := refusal(t, startWithBrokers(t, p.standby.URL("postgres"), p.broker.ListenAddrs(), "walrelay"))
	if err == nil || !strings.Contains(err.Error(), "--primary-url") {
		t.Fatalf("a standby without --primary-url: Run returned %v, want a refusal naming --primary-url", err)
	}

	var written []outbox.Event
	written = append(written, testenv.WriteTx(t, p.onPrimary, aggregates("b", 5), "before", 50, false)...)
	waitReplayed(t, ctx, p.onPrimary, p.onStandby)
	onStandbyCfg := func(c *config) { c.PrimaryURL = p.primary.URL("postgres") }
	rn := startWithBrokers(t, p.standby.URL("postgres"), p.broker.ListenAddrs(), "walrelay", onStandbyCfg)
	if !rn.waitLog(2*time.Minute, "msg=streaming") {
		t.Fatal("the relay did not start streaming from the standby")
	}
	if !strings.Contains(rn.logs.String(), "decoding on a hot standby") {
		t.Fatal("the relay did not say it decodes on a standby")
	}
	written = append(written, testenv.WriteTx(t, p.onPrimary, aggregates("s", 5), "streamed", 50, false)...)
	if !p.consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("first run: %d of %d delivered", p.consumer.Distinct(), len(written))
	}
	rn.stop()

	written = append(written, testenv.WriteTx(t, p.onPrimary, aggregates("d", 5), "while-down", 50, false)...)
	rn = startWithBrokers(t, p.standby.URL("postgres"), p.broker.ListenAddrs(), "walrelay", onStandbyCfg)
	written = append(written, testenv.WriteTx(t, p.onPrimary, aggregates("a", 5), "after", 50, false)...)
	if !p.consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("after the restart: %d of %d delivered", p.consumer.Distinct(), len(written))
	}
	// Anything published twice would have arrived by the time a later event did.
	last := testenv.WriteTx(t, p.onPrimary, aggregates("z", 1), "last", 1, false)
	written = append(written, last...)
	if !p.consumer.WaitFor(time.Minute, func() bool { return p.consumer.Count(last[0].ID) > 0 }) {
		t.Fatal("the last event did not arrive")
	}
	for _, ev := range written {
		if n := p.consumer.Count(ev.ID); n != 1 {
			t.Errorf("event %s (%s) arrived %d times, want once", ev.ID, ev.EventType, n)
		}
	}
	if n := strings.Count(rn.logs.String(), "created replication slot"); n != 0 {
		t.Errorf("the restarted relay created the slot %d times; it must stream the standby's slot", n)
	}

	var onStandbyKind, onPrimaryKind string
	if err := p.onStandby.QueryRow(ctx, "SELECT slot_type FROM pg_replication_slots WHERE slot_name = 'walrelay'").Scan(&onStandbyKind); err != nil || onStandbyKind != "logical" {
		t.Errorf("the standby has no logical slot walrelay (%q, %v)", onStandbyKind, err)
	}
	if err := p.onPrimary.QueryRow(ctx, "SELECT coalesce(max(slot_type), '') FROM pg_replication_slots WHERE slot_name = 'walrelay'").Scan(&onPrimaryKind); err != nil || onPrimaryKind != "" {
		t.Errorf("the primary has a slot walrelay (%q, %v); it belongs on the standby", onPrimaryKind, err)
	}
	var recorded bool
	if err := p.onPrimary.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM walrelay_slots WHERE slot_name = 'walrelay')").Scan(&recorded); err != nil || !recorded {
		t.Errorf("the primary has no walrelay_slots record of the slot (%v, %v)", recorded, err)
	}
	t.Logf("%d events written, %d records delivered", len(written), len(p.consumer.Records))
}

// A hot standby on PostgreSQL 15 cannot decode: the relay refuses it with an error
// that says what to do.
func TestStandbyBefore16IsRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	binDir, err := pgcluster.BinDirFor("15")
	if err != nil {
		needBinaries(t, err)
	}
	p := startStandbyPair(t, ctx, binDir)
	rn := startWithBrokers(t, p.standby.URL("postgres"), p.broker.ListenAddrs(), "walrelay",
		func(c *config) { c.PrimaryURL = p.primary.URL("postgres") })
	err = refusal(t, rn)
	if err == nil || !strings.Contains(err.Error(), "PostgreSQL 15") || !strings.Contains(err.Error(), "16 or later") {
		t.Fatalf("a standby on 15: Run returned %v, want a refusal that names 15 and 16 or later", err)
	}
	if !strings.Contains(err.Error(), "point --database-url at the primary") {
		t.Errorf("the refusal does not say what to do: %v", err)
	}
}

// The standby the slot is on is promoted while the relay streams: the relay stops
// with an error that says what to do rather than keep writing its bookkeeping to the
// old primary, and started again it keeps everything on the promoted server, from
// the same slot. Nothing is lost.
func TestPromotedStandbyStopsTheRelay(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	p := startStandbyPair(t, ctx, standbyBinaries(t))

	onStandbyCfg := func(c *config) { c.PrimaryURL = p.primary.URL("postgres") }
	rn := startWithBrokers(t, p.standby.URL("postgres"), p.broker.ListenAddrs(), "walrelay", onStandbyCfg)
	if !rn.waitLog(2*time.Minute, "msg=streaming") {
		t.Fatal("the relay did not start streaming from the standby")
	}
	written := testenv.WriteTx(t, p.onPrimary, aggregates("b", 5), "before", 50, false)
	if !p.consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("before the promotion: %d of %d delivered", p.consumer.Distinct(), len(written))
	}
	waitReplayed(t, ctx, p.onPrimary, p.onStandby)
	if err := p.standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	written = append(written, testenv.WriteTx(t, p.onStandby, aggregates("p", 5), "promoted", 50, false)...)
	err := refusal(t, rn)
	if err == nil || !strings.Contains(err.Error(), "was promoted") {
		t.Fatalf("after the promotion Run returned %v, want an error saying the standby was promoted", err)
	}

	rn = startWithBrokers(t, p.standby.URL("postgres"), p.broker.ListenAddrs(), "walrelay", onStandbyCfg)
	written = append(written, testenv.WriteTx(t, p.onStandby, aggregates("a", 5), "after", 50, false)...)
	if !p.consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("after the restart: %d of %d delivered", p.consumer.Distinct(), len(written))
	}
	for _, ev := range written {
		if p.consumer.Count(ev.ID) == 0 {
			t.Fatalf("event %s (%s) lost", ev.ID, ev.EventType)
		}
	}
	logs := rn.logs.String()
	if !strings.Contains(logs, "remove --primary-url") {
		t.Error("the restarted relay did not say that --primary-url is ignored")
	}
	if strings.Contains(logs, "created replication slot") {
		t.Error("the restarted relay created the slot again; the promoted server kept it")
	}
	t.Logf("%d events written, %d records delivered", len(written), len(p.consumer.Records))
}

// heldSink holds the events of one type until released, then refuses them (an
// event error, which hands them to the poller) while refuse is set.
type heldSink struct {
	sink.Sink
	eventType string
	seen      chan struct{} // closed when the first such event came
	seenOnce  sync.Once
	release   chan struct{}
	refuse    atomic.Bool
}

func (s *heldSink) Publish(e *outbox.Event, done sink.Done) {
	if e.EventType != s.eventType {
		s.Sink.Publish(e, done)
		return
	}
	s.seenOnce.Do(func() { close(s.seen) })
	go func() {
		<-s.release
		if s.refuse.Load() {
			done.Done(&sink.EventError{Err: errors.New("refused by the test")})
			return
		}
		s.Sink.Publish(e, done)
	}()
}

// The primary is lost after a hand-over was committed there but before the standby
// received it: the slot on the standby must not have confirmed past the event, so
// that the promoted standby streams it again. Were it confirmed, the promoted
// server would hold the row without its hand-over, and nothing would publish it.
func TestStandbyHandOverSurvivesLosingThePrimary(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	p := startStandbyPair(t, ctx, standbyBinaries(t))
	kafkaSink, err := kafka.New(kafka.Config{Brokers: p.broker.ListenAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kafkaSink.Close)
	held := &heldSink{Sink: kafkaSink, eventType: "poison", seen: make(chan struct{}), release: make(chan struct{})}
	held.refuse.Store(true)
	onStandbyCfg := func(c *config) { c.PrimaryURL = p.primary.URL("postgres"); c.Sink = held }
	rn := startWithBrokers(t, p.standby.URL("postgres"), p.broker.ListenAddrs(), "walrelay", onStandbyCfg)
	if !rn.waitLog(2*time.Minute, "msg=streaming") {
		t.Fatal("the relay did not start streaming from the standby")
	}
	written := testenv.WriteTx(t, p.onPrimary, aggregates("b", 5), "before", 20, false)
	if !p.consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("before: %d of %d delivered", p.consumer.Distinct(), len(written))
	}
	poison := testenv.WriteTx(t, p.onPrimary, []string{"p"}, "poison", 1, false)[0]
	committed := testenv.CurrentLSN(t, p.onPrimary)
	select {
	case <-held.seen:
	case <-ctx.Done():
		t.Fatal("the poison event was not decoded on the standby")
	}
	// The standby decoded the event; from now on it receives nothing more.
	for _, sql := range []string{"ALTER SYSTEM SET primary_conninfo = 'host=127.0.0.1 port=1 user=postgres'", "SELECT pg_reload_conf()"} {
		if _, err := p.onStandby.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, time.Minute, "the standby's replication to stop", func() bool {
		var n int
		_, _ = p.onPrimary.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_replication")
		err := p.onPrimary.QueryRow(ctx, "SELECT count(*) FROM pg_stat_replication").Scan(&n)
		return err == nil && n == 0
	})
	close(held.release)
	waitFor(t, time.Minute, "the hand-over on the primary", func() bool {
		var handedOver bool
		err := p.onPrimary.QueryRow(ctx, "SELECT attempts > 0 OR retry_after IS NOT NULL FROM outbox_events WHERE id = $1",
			poison.ID).Scan(&handedOver)
		return err == nil && handedOver
	})
	// Either the slot confirms past the event (which loses it below), or the relay
	// says it will not.
	waitFor(t, time.Minute, "the slot to confirm past the event, or the relay to refuse to", func() bool {
		return testenv.SlotLSN(t, p.onStandby, "walrelay") >= committed ||
			strings.Contains(rn.logs.String(), "has not received walrelay's bookkeeping")
	})

	if err := p.primary.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := p.standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	held.refuse.Store(false)
	if err := refusal(t, rn); err == nil || !strings.Contains(err.Error(), "was promoted") {
		t.Fatalf("after the promotion Run returned %v, want an error saying the standby was promoted", err)
	}
	rn = startWithBrokers(t, p.standby.URL("postgres"), p.broker.ListenAddrs(), "walrelay", onStandbyCfg)
	if !p.consumer.WaitFor(time.Minute, func() bool { return p.consumer.Count(poison.ID) > 0 }) {
		t.Fatal("the event handed over on the lost primary was lost: the slot had confirmed past it")
	}
}
