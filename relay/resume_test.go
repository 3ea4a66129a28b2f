package relay_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
)

// A session starts from the relay's record of what it confirmed when that is ahead of
// the slot, and only when the record comes from this slot's incarnation, cluster,
// database and timeline, within the server's WAL (docs/design.md invariant 8). Each
// case stops the relay, writes events the slot has not confirmed, and moves the
// record past them, as a lost slot save would leave it but under another name: a
// record from elsewhere is ignored, loudly, and the events arrive; this slot's own
// record is streamed from, and the server sends nothing committed before it (which is
// why only a confirmed LSN is ever recorded).
func TestRecordedPositionFromElsewhereIsIgnored(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		forge  string // SET clause on walrelay_confirmed besides confirmed_lsn
		ahead  uint64 // bytes the record is put past the server's WAL
		ignore bool
	}{
		{"this slot's", "", 0, false},
		{"earlier incarnation", ", slot_created_at = slot_created_at - interval '1 second'", 0, true},
		{"other cluster", ", system_id = '1'", 0, true},
		{"other database", ", database_name = 'elsewhere'", 0, true},
		{"later timeline", ", timeline = timeline + 1", 0, true},
		{"ahead of the server's WAL", "", 1 << 30, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbURL, broker, conn := outboxWithBroker(t)
			slot := "resume_" + strings.ToLower(strings.NewReplacer(" ", "_", "'", "").Replace(tc.name))
			rn := start(t, dbURL, broker, slot)
			if !rn.waitLog(time.Minute, "msg=streaming") {
				t.Fatal("the relay did not start streaming")
			}
			consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
			aggs := []string{"resume"} // one partition: what is sent arrives in stream order
			first := testenv.WriteTx(t, conn, aggs, "first", 5, false)
			end := testenv.CurrentLSN(t, conn)
			waitFor(t, time.Minute, "a record of the first events", func() bool {
				rec, ok := readConfirmedRecord(t, conn, slot)
				return ok && rec.lsn >= end
			})
			rn.stop()
			if !consumer.WaitDistinct(time.Minute, len(first)) {
				t.Fatalf("delivered %d of %d", consumer.Distinct(), len(first))
			}

			skipped := testenv.WriteTx(t, conn, aggs, "past-the-slot", 5, false)
			at := testenv.CurrentLSN(t, conn) + pglogrepl.LSN(tc.ahead)
			if _, err := conn.Exec(context.Background(), "UPDATE walrelay_confirmed SET confirmed_lsn = $2::text::pg_lsn"+tc.forge+
				" WHERE slot_name = $1", slot, at.String()); err != nil {
				t.Fatal(err)
			}
			last := testenv.WriteTx(t, conn, aggs, "last", 1, false)[0]
			rn = start(t, dbURL, broker, slot)
			if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(last.ID) > 0 }) {
				t.Fatal("the event written after the record was not delivered")
			}
			sent := 0
			for _, ev := range skipped {
				if consumer.Count(ev.ID) > 0 {
					sent++
				}
			}
			logs := rn.logs.String()
			if tc.ignore {
				if sent != len(skipped) {
					t.Errorf("%d of %d events past the slot's position delivered: a record from elsewhere was trusted", sent, len(skipped))
				}
				if !strings.Contains(logs, "ignoring the recorded confirmed position") {
					t.Error("the relay did not say it ignored the record")
				}
				return
			}
			if sent != 0 {
				t.Errorf("%d of %d events committed before the recorded position were sent; the server should skip them", sent, len(skipped))
			}
			if !strings.Contains(logs, "streaming from the recorded position") {
				t.Error("the relay did not say it streams from the recorded position")
			}
			checkDeliveredOnce(t, consumer, first)
		})
	}
}

// checkDeliveredOnce fails the test for each event not delivered exactly once.
func checkDeliveredOnce(t *testing.T, consumer *testenv.Consumer, events []outbox.Event) {
	t.Helper()
	for _, ev := range events {
		if n := consumer.Count(ev.ID); n != 1 {
			t.Errorf("event %s (%s) delivered %d times, want once", ev.ID, ev.EventType, n)
		}
	}
}
