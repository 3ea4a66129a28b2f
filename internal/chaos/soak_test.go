package chaos_test

import (
	"context"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/testenv"
)

// soakProfile sizes the huge transactions.
type soakProfile struct {
	name      string
	rows      int // (a): small rows in one transaction
	largeRows int // (b): 100 KiB rows in one transaction
	deliver   time.Duration
}

var (
	shortSoak = soakProfile{name: "short", rows: 200_000, largeRows: 2_000, deliver: 3 * time.Minute}
	fullSoak  = soakProfile{name: "full", rows: 1_000_000, largeRows: 10_000, deliver: 20 * time.Minute}
)

const (
	largeRowBytes = 100 << 10
	soakSlot      = "soak"
	// rssLimit is the relay's memory budget: the in-flight window (64 MiB of events by
	// default) plus the Go runtime and the producer's buffers.
	rssLimit = 256 << 20
	// soakSenderTimeout is the server's wal_sender_timeout during the soak.
	soakSenderTimeout = 10 * time.Second
)

// TestHugeTransactions commits, while the relay binary streams with its default
// window, (a) one transaction of many small outbox rows and (b) one transaction of
// hundreds of megabytes of payload, and checks that every row is delivered, that the
// relay's memory stays bounded, and that standby status updates kept flowing so
// PostgreSQL never timed the connection out.
//
// Short by default (part of go test ./...); WALRELAY_SOAK=full runs 1,000,000 rows
// and 1 GB (make soak).
func TestHugeTransactions(t *testing.T) {
	if testing.Short() {
		t.Skip("soak test skipped in -short mode")
	}
	prof := shortSoak
	if os.Getenv("WALRELAY_SOAK") == "full" {
		prof = fullSoak
	}
	_, dbURL := startCluster(t, soakSenderTimeout)
	// The relay reaches the broker directly: this test takes nothing away.
	kafka := testenv.Kafka(t)
	brokers := kafka.ListenAddrs()
	db := &admin{url: dbURL}
	t.Cleanup(db.close)

	relay := newRelayRuns(t, relayEnv(dbURL, strings.Join(brokers, ","), soakSlot))
	relay.start()
	waitStreaming(t, db, soakSlot, relay, time.Minute)
	pid := relay.pid()

	counter := newIDCounter(t, brokers)

	// Memory: VmRSS every 100ms.
	var peakRSS atomic.Int64
	stopSampling := make(chan struct{})
	var samplers sync.WaitGroup
	samplers.Add(1)
	go func() {
		defer samplers.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if st, err := procStatus(pid, "VmRSS"); err == nil && st["VmRSS"] > peakRSS.Load() {
				peakRSS.Store(st["VmRSS"])
			}
			select {
			case <-tick.C:
			case <-stopSampling:
				return
			}
		}
	}()
	// Status updates: the walsender's reply_time every 500ms.
	replies := &replyWatch{}
	samplers.Add(1)
	go func() {
		defer samplers.Done()
		replies.run(dbURL, soakSlot, stopSampling)
	}()
	var stopOnce sync.Once
	stopSamplers := func() { stopOnce.Do(func() { close(stopSampling); samplers.Wait() }) }
	t.Cleanup(stopSamplers)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })

	phase := func(name, eventType string, rows int, insert string) {
		t.Helper()
		began := time.Now()
		tag, err := conn.Exec(ctx, insert, rows)
		if err != nil {
			t.Fatalf("%s: insert: %v", name, err)
		}
		if tag.RowsAffected() != int64(rows) {
			t.Fatalf("%s: inserted %d rows, want %d", name, tag.RowsAffected(), rows)
		}
		committed := time.Now()
		if !poll(prof.deliver, func() bool {
			relay.check()
			return counter.distinct(eventType) >= rows
		}) {
			t.Fatalf("%s: %d of %d rows delivered within %s of the commit", name, counter.distinct(eventType), rows, prof.deliver)
		}
		delivered := time.Since(committed)
		bytes := counter.bytes(eventType)
		t.Logf("%s: %d rows, %.1f MiB of payload in one transaction; insert+commit %.1fs, commit to last delivery %.1fs "+
			"(%.0f events/s, %.1f MiB/s); relay peak RSS so far %.1f MiB",
			name, rows, mib(bytes), committed.Sub(began).Seconds(), delivered.Seconds(),
			float64(rows)/delivered.Seconds(), mib(bytes)/delivered.Seconds(), mib(peakRSS.Load()))
	}

	// (a) many rows of about 200 bytes.
	phase("(a) many rows", "bulk.row", prof.rows, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
		SELECT 'bulk', 'row-' || (i % 1000), 'bulk.row', jsonb_build_object('i', i, 'pad', repeat('x', 180))
		FROM generate_series(1, $1) AS i`)
	// (b) 100 KiB rows. The payload is random hex, so TOAST cannot compress it away and
	// the bytes really go through the WAL, the walsender and the relay.
	phase("(b) large payload", "bulk.large", prof.largeRows, `WITH blob AS (
			SELECT string_agg(md5(random()::text), '') AS s FROM generate_series(1, `+strconv.Itoa(largeRowBytes/32)+`))
		INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
		SELECT 'bulk', 'large-' || (i % 100), 'bulk.large', jsonb_build_object('i', i, 'blob', blob.s)
		FROM generate_series(1, $1) AS i, blob`)

	hwm, hwmErr := procStatus(pid, "VmHWM")
	stopSamplers()
	gap, changes, pids := replies.result()
	relay.stop(30 * time.Second)
	if hwmErr != nil {
		t.Errorf("read VmHWM: %v", hwmErr)
	}

	for _, et := range []string{"bulk.row", "bulk.large"} {
		want := prof.rows
		if et == "bulk.large" {
			want = prof.largeRows
		}
		if got := counter.distinct(et); got != want {
			t.Errorf("%s: %d distinct events delivered, want %d", et, got, want)
		}
	}
	t.Logf("relay memory: peak VmRSS %.1f MiB (sampled every 100ms), VmHWM %.1f MiB; limit %.0f MiB",
		mib(peakRSS.Load()), mib(hwm["VmHWM"]), mib(rssLimit))
	if peak := max(peakRSS.Load(), hwm["VmHWM"]); peak >= rssLimit {
		t.Errorf("relay memory peaked at %.1f MiB, want below %.0f MiB", mib(peak), mib(rssLimit))
	}

	// reply_time is the send time of the last reply the walsender processed. The relay
	// replies every status interval while the confirmed LSN moves and every
	// wal_sender_timeout/3 otherwise; but while the walsender streams one large
	// transaction to a client that keeps up, it reads replies only once
	// wal_sender_timeout/2 passed since the last one (its fast path), so gaps of about
	// 5s with a 10s timeout are the server's doing. A relay that stopped replying (say,
	// while its window is full) would let the gap reach the timeout and lose the
	// connection. So: below timeout/2 + 1s, on one walsender throughout.
	t.Logf("status updates: %d reply_time changes seen, largest gap %.1fs (wal_sender_timeout %s), walsenders %d",
		changes, gap.Seconds(), soakSenderTimeout, pids)
	if limit := soakSenderTimeout/2 + time.Second; gap >= limit {
		t.Errorf("standby status updates paused for %.1fs, want below %s (wal_sender_timeout %s)", gap.Seconds(), limit, soakSenderTimeout)
	}
	if pids != 1 {
		t.Errorf("the slot was streamed by %d walsenders during the soak, want 1 (the connection was lost)", pids)
	}
	if n := relay.logCount("replication session failed"); n > 0 {
		t.Errorf("the relay's replication session failed %d times during the soak", n)
	}
	if counter.dups.Load() > 0 {
		t.Logf("duplicates: %d", counter.dups.Load())
	}
}

// idCounter consumes every outbox topic and counts distinct event ids and payload
// bytes per event type, without keeping the records.
type idCounter struct {
	mu struct {
		sync.Mutex
		ids   map[string]map[[16]byte]struct{}
		bytes map[string]int64
	}
	dups atomic.Int64
}

func newIDCounter(t *testing.T, brokers []string) *idCounter {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeRegex(), kgo.ConsumeTopics(`outbox\.event\..*`),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(time.Second))
	if err != nil {
		t.Fatalf("kafka consumer: %v", err)
	}
	c := &idCounter{}
	c.mu.ids = map[string]map[[16]byte]struct{}{}
	c.mu.bytes = map[string]int64{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fetches := cl.PollFetches(ctx)
			c.mu.Lock()
			fetches.EachRecord(func(r *kgo.Record) {
				var key [16]byte
				hex.Decode(key[:], []byte(strings.ReplaceAll(testenv.Header(r, "id"), "-", "")))
				et := testenv.Header(r, "event_type")
				set := c.mu.ids[et]
				if set == nil {
					set = map[[16]byte]struct{}{}
					c.mu.ids[et] = set
				}
				if _, ok := set[key]; ok {
					c.dups.Add(1)
					return
				}
				set[key] = struct{}{}
				c.mu.bytes[et] += int64(len(r.Value))
			})
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
	return c
}

func (c *idCounter) distinct(eventType string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.ids[eventType])
}

func (c *idCounter) bytes(eventType string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.bytes[eventType]
}

// replyWatch polls pg_stat_replication.reply_time of the slot's walsender and keeps
// the largest gap between two successive values (the server's clock), and how many
// walsenders streamed the slot.
type replyWatch struct {
	mu      sync.Mutex
	last    time.Time
	gap     time.Duration
	changes int
	pids    map[int32]bool
}

func (w *replyWatch) run(dbURL, slot string, stop <-chan struct{}) {
	db := &admin{url: dbURL}
	defer db.close()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		var pid int32
		var reply *time.Time
		err := db.queryRow(context.Background(), `SELECT r.pid, r.reply_time FROM pg_stat_replication r
			JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = $1`, []any{slot}, &pid, &reply)
		if err == nil && reply != nil {
			w.mu.Lock()
			if w.pids == nil {
				w.pids = map[int32]bool{}
			}
			w.pids[pid] = true
			if !reply.Equal(w.last) {
				if !w.last.IsZero() {
					w.gap = max(w.gap, reply.Sub(w.last))
				}
				w.last = *reply
				w.changes++
			}
			w.mu.Unlock()
		}
		select {
		case <-tick.C:
		case <-stop:
			return
		}
	}
}

// result is taken while the relay still runs: the time since the last change counts
// as a gap too.
func (w *replyWatch) result() (gap time.Duration, changes, pids int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	gap = w.gap
	if !w.last.IsZero() {
		gap = max(gap, time.Since(w.last))
	}
	return gap, w.changes, len(w.pids)
}
