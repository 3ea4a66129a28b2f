package ops_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/ops"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/sinks"
)

// replayEnv is a migrated database with a slot no relay streams, a broker, and a
// sink to it: what a replay needs, and a slot to show it is left alone.
type replayEnv struct {
	dbURL string
	conn  *pgx.Conn
	pool  *pgxpool.Pool
	sink  sink.Sink
	cfg   relay.Config
	cons  *testenv.Consumer
	slot  string
}

func newReplayEnv(t *testing.T, slot string) replayEnv {
	t.Helper()
	dbURL, broker, conn := outboxWithBroker(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	sc := sinks.DefaultConfig()
	sc.Kafka.Brokers = broker.ListenAddrs()
	cfg := relay.DefaultConfig()
	cfg.DatabaseURL = dbURL
	snk, err := sinks.Open(context.Background(), sc, sinks.Window{Events: cfg.MaxInFlightEvents, Bytes: cfg.MaxInFlightBytes,
		PollBatch: cfg.PollInFlight()}, slog.New(slog.DiscardHandler), cfg.ReconnectMin, cfg.ReconnectMax)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(snk.Close)
	if _, err := conn.Exec(context.Background(), "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", slot); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = testenv.Connect(t, dbURL).Exec(context.Background(), "SELECT pg_drop_replication_slot($1)", slot)
	})
	return replayEnv{dbURL: dbURL, conn: conn, pool: pool, sink: snk, cfg: cfg, slot: slot,
		cons: testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)}
}

// books is what a replay must leave as it is: the slot's position and every row's
// bookkeeping.
func (e replayEnv) books(t *testing.T) string {
	t.Helper()
	var s string
	if err := e.conn.QueryRow(context.Background(), `SELECT
		(SELECT confirmed_flush_lsn::text || '/' || restart_lsn::text FROM pg_replication_slots WHERE slot_name = $1)
		|| ' ' || coalesce((SELECT string_agg(concat_ws(',', id, attempts, last_error, retry_after, dead_lettered_at, processed_at), ';' ORDER BY id)
		FROM outbox_events), '')`, e.slot).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// replayed consumes until n records of the replay id arrived, and returns them by
// event id; it fails when more arrive.
func (e replayEnv) replayed(t *testing.T, id string, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	count := func() int {
		clear(got)
		total := 0
		for _, r := range e.cons.Records {
			if testenv.Header(r, ops.ReplayHeader) == id {
				got[testenv.Header(r, "id")]++
				total++
			}
		}
		return total
	}
	if !e.cons.WaitFor(time.Minute, func() bool { return count() >= n }) {
		t.Fatalf("replay %s: consumed %d records, want %d", id, count(), n)
	}
	if c := count(); c != n {
		t.Fatalf("replay %s: consumed %d records, want %d", id, c, n)
	}
	return got
}

// A replay publishes again exactly the rows its filters select, in the stream's
// record format with the id header and a replay header; a dry run counts them and
// publishes nothing; the rate bounds how fast; the slot and the rows' bookkeeping
// are untouched.
func TestReplayFiltersCountsAndHeaders(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t, "replay_filters")
	ctx := context.Background()
	created := testenv.WriteTx(t, e.conn, []string{"a"}, "order.created", 4, false)
	shipped := testenv.WriteTx(t, e.conn, []string{"b"}, "order.shipped", 3, false)
	customer := outbox.Event{AggregateType: "customer", AggregateID: "c-1", EventType: "customer.created", Payload: []byte(`{"n": 1}`)}
	tx, err := e.conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Write(ctx, tx, &customer); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Two rows from two hours ago, and one of them waiting for a retry: bookkeeping a
	// replay must leave alone.
	if _, err := e.conn.Exec(ctx, `UPDATE outbox_events SET created_at = now() - interval '2 hours' WHERE id = ANY($1)`,
		[]string{created[0].ID, shipped[0].ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.conn.Exec(ctx, `UPDATE outbox_events SET attempts = 1, last_error = 'x', retry_after = now() + interval '1 hour'
		WHERE id = $1`, shipped[1].ID); err != nil {
		t.Fatal(err)
	}
	before := e.books(t)

	replay := func(id string, f ops.ReplayFilter, dry bool, rate float64) ops.ReplayProgress {
		t.Helper()
		var last ops.ReplayProgress
		pr, err := ops.Replay(ctx, e.pool, e.sink, e.cfg, ops.ReplayOptions{Filter: f, ID: id, DryRun: dry, Rate: rate,
			OnProgress: func(p ops.ReplayProgress) { last = p }})
		if err != nil {
			t.Fatalf("replay %s: %v", id, err)
		}
		if !last.Done || last.Sent != pr.Sent {
			t.Errorf("replay %s: last progress %+v, want done with the result's counts %+v", id, last, pr)
		}
		return pr
	}

	if pr := replay("dry", ops.ReplayFilter{AggregateID: "a"}, true, 0); pr.Total != 4 || pr.Sent != 0 {
		t.Errorf("dry run by aggregate id: %+v, want 4 counted and none sent", pr)
	}
	if pr := replay("dry-type", ops.ReplayFilter{AggregateType: "customer"}, true, 0); pr.Total != 1 {
		t.Errorf("dry run by aggregate type: %+v, want 1 counted", pr)
	}

	pr := replay("by-type", ops.ReplayFilter{EventType: "order.shipped"}, false, 0)
	if pr.Total != 3 || pr.Sent != 3 {
		t.Errorf("replay by event type: %+v, want 3 of 3", pr)
	}
	got := e.replayed(t, "by-type", 3)
	for _, ev := range shipped {
		if got[ev.ID] != 1 {
			t.Errorf("event %s replayed %d times, want once", ev.ID, got[ev.ID])
		}
	}
	for _, r := range e.cons.Records {
		if testenv.Header(r, ops.ReplayHeader) != "by-type" {
			continue
		}
		if r.Topic != "outbox.event.order" || string(r.Key) != "b" || testenv.Header(r, "event_type") != "order.shipped" ||
			testenv.Header(r, "aggregate_id") != "b" || r.Headers[0].Key != "id" {
			t.Errorf("replayed record: topic %s key %s headers %v; want the stream's format, id first", r.Topic, r.Key, r.Headers)
		}
	}

	replay("by-id", ops.ReplayFilter{IDs: []string{created[1].ID, customer.ID}}, false, 0)
	if got := e.replayed(t, "by-id", 2); got[created[1].ID] != 1 || got[customer.ID] != 1 {
		t.Errorf("replay by id: %v, want %s and %s once each", got, created[1].ID, customer.ID)
	}

	now := time.Now()
	pr = replay("by-time", ops.ReplayFilter{Since: now.Add(-3 * time.Hour), Until: now.Add(-time.Hour)}, false, 0)
	if got := e.replayed(t, "by-time", 2); pr.Total != 2 || got[created[0].ID] != 1 || got[shipped[0].ID] != 1 {
		t.Errorf("replay by time: %+v %v, want the two rows from two hours ago", pr, got)
	}
	pr = replay("by-time-and-aggregate", ops.ReplayFilter{Since: now.Add(-3 * time.Hour), AggregateID: "a"}, false, 0)
	if pr.Total != 4 {
		t.Errorf("replay since 3h of aggregate a: %+v, want 4", pr)
	}
	e.replayed(t, "by-time-and-aggregate", 4)

	// Every event at 20 per second: the pacing hands the eighth over 7/20 s after the first.
	began := time.Now()
	pr = replay("paced", ops.ReplayFilter{}, false, 20)
	if took := time.Since(began); pr.Sent != 8 || took < 350*time.Millisecond {
		t.Errorf("paced replay: %+v in %s, want 8 sent in no less than 350ms", pr, took)
	}
	e.replayed(t, "paced", 8)

	if after := e.books(t); after != before {
		t.Errorf("the replays changed the slot or the bookkeeping:\nbefore %s\nafter  %s", before, after)
	}
}

// Where the rows are gone a replay refuses before it reads or publishes anything:
// with --on-publish delete. A --since older than the retention replays from the
// oldest row still kept, and says which.
func TestReplayRefusedWhereRowsAreGone(t *testing.T) {
	t.Parallel()
	e := newReplayEnv(t, "replay_refused")
	testenv.WriteTx(t, e.conn, []string{"a"}, "order.created", 3, false)
	ctx := context.Background()

	del := e.cfg
	del.OnPublish = poller.Delete
	_, err := ops.Replay(ctx, e.pool, e.sink, del, ops.ReplayOptions{ID: "deleted"})
	if err == nil || !strings.Contains(err.Error(), "--on-publish delete") || !strings.Contains(err.Error(), "--on-publish progress") {
		t.Fatalf("replay with --on-publish delete: %v, want a refusal naming the mode and what keeps rows", err)
	}
	// Nothing was published: a replay that is allowed is the first record.
	if _, err := ops.Replay(ctx, e.pool, e.sink, e.cfg, ops.ReplayOptions{ID: "allowed"}); err != nil {
		t.Fatal(err)
	}
	e.replayed(t, "allowed", 3)
	for _, r := range e.cons.Records {
		if id := testenv.Header(r, ops.ReplayHeader); id != "allowed" {
			t.Errorf("a refused replay (%s) published %s", id, testenv.Header(r, "id"))
		}
	}

	kept := e.cfg
	kept.Retention = time.Hour
	var oldest time.Time
	if err := e.conn.QueryRow(ctx, "SELECT min(created_at) FROM outbox_events").Scan(&oldest); err != nil {
		t.Fatal(err)
	}
	pr, err := ops.Replay(ctx, e.pool, e.sink, kept, ops.ReplayOptions{ID: "too-old",
		Filter: ops.ReplayFilter{Since: time.Now().Add(-2 * time.Hour)}})
	want := "--retention 1h0m0s (rows created before "
	if err != nil || !strings.Contains(pr.Note, want) ||
		!strings.Contains(pr.Note, "replaying from the oldest matching row still kept, created at "+oldest.UTC().Format(time.RFC3339Nano)) {
		t.Fatalf("replay from before the retention: %v, note %q; want the replay, and a note naming the oldest row kept", err, pr.Note)
	}
	e.replayed(t, "too-old", 3)
}

// --since and --until take a time, a duration, or days.
func TestParseReplayTime(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"2026-01-02T15:04:05Z", time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)},
		{"2h", now.Add(-2 * time.Hour)},
		{"30d", now.AddDate(0, 0, -30)},
		{"1.5d", now.Add(-36 * time.Hour)},
	} {
		got, err := ops.ParseReplayTime("--since", tc.in, now)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("ParseReplayTime(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"-2h", "30", "d", "-1d", "yesterday"} {
		if _, err := ops.ParseReplayTime("--since", bad, now); err == nil || !strings.Contains(err.Error(), "30d") {
			t.Errorf("ParseReplayTime(%q): %v, want an error naming the forms", bad, err)
		}
	}
}
