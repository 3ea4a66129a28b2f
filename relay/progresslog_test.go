package relay_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
)

// Long work says how far it has come: a catch-up pass over rows committed before the
// slot existed, and a session that starts behind the server's WAL, log what is done,
// the total, the rate and the time left, then a line when they are done; and every
// row is delivered.
func TestProgressOfLongWork(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	ctx := context.Background()
	insert := func(n int, eventType string) {
		t.Helper()
		if _, err := conn.Exec(ctx, `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload)
			SELECT 'order', g::text, $2, '{}' FROM generate_series(1, $1::int) g`, n, eventType); err != nil {
			t.Fatal(err)
		}
	}
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	fast := func(c *config) { c.ProgressLogInterval, c.MaxInFlightEvents = time.Millisecond, 50 }

	insert(1000, "before.slot")
	rn := start(t, dbURL, broker, "progress_log", fast)
	if !consumer.WaitDistinct(time.Minute, 1000) {
		t.Fatalf("catch-up pass: delivered %d of 1000", consumer.Distinct())
	}
	if !rn.waitLog(10*time.Second, `msg="catch-up pass read every pending row of the table" slot=progress_log table=public.outbox_events rows=1000 `) {
		t.Fatal("no line at the end of the catch-up pass's reading")
	}
	if !rn.waitLog(10*time.Second, "catch-up pass done") {
		t.Fatal("the catch-up pass did not finish")
	}
	line := regexp.MustCompile(`msg="catch-up pass in progress" slot=progress_log table=public.outbox_events rows=[0-9]+ ` +
		`rows_total=1000 percent=[0-9]+ rows_per_second=[0-9]+ eta=[0-9hms.]+\n`)
	if !line.MatchString(rn.logs.String()) {
		t.Errorf("no progress line of the catch-up pass with rows done, total, rate and time left:\n%s", rn.logs.String())
	}
	rn.stop()

	// 500 rows while the relay is down, and the broker refusing writes when it
	// starts again: the session stays behind, and says how far it is.
	insert(500, "while.down")
	fault := broker.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotEnoughReplicas, Count: -1})
	rn = start(t, dbURL, broker, "progress_log", fast)
	backlog := regexp.MustCompile(`msg="relaying the WAL written before the start" slot=progress_log from_lsn=\S+ to_lsn=\S+ ` +
		`read_wal_bytes=[0-9]+ read_wal_bytes_total=[1-9][0-9]* percent=[0-9]+ read_wal_bytes_per_second=[0-9]+ (eta=\S+ )?` +
		`relayed_wal_bytes=[0-9]+ events=[0-9]+ events_per_second=[0-9]+\n`)
	if !testenv.Eventually(30*time.Second, func() bool { return backlog.MatchString(rn.logs.String()) }) {
		t.Fatalf("no progress line while behind the WAL written before the start:\n%s", rn.logs.String())
	}
	fault.Remove()
	if !consumer.WaitDistinct(time.Minute, 1500) {
		t.Fatalf("after the restart: delivered %d of 1500", consumer.Distinct())
	}
	if !rn.waitLog(30*time.Second, `msg="caught up with the WAL written before the start"`) ||
		!regexp.MustCompile(`msg="caught up with the WAL written before the start" .* events=500\n`).MatchString(rn.logs.String()) {
		t.Errorf("no line when the WAL written before the start was relayed, with its 500 events:\n%s", rn.logs.String())
	}
}
