package relay_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/poller"
	"github.com/walrelay/walrelay/relay"
	"github.com/walrelay/walrelay/sink"
	"github.com/walrelay/walrelay/sink/kafka"
)

// confirmedRecord is a slot's row of walrelay_confirmed as a test checks it.
type confirmedRecord struct {
	lsn      pglogrepl.LSN
	here     bool // system, database, incarnation and timeline are this server's and the slot's
	recorded time.Time
}

// readConfirmedRecord reads the slot's row; ok is false when there is none.
func readConfirmedRecord(t testing.TB, conn *pgx.Conn, slot string) (rec confirmedRecord, ok bool) {
	t.Helper()
	var at string
	err := conn.QueryRow(context.Background(), `SELECT c.confirmed_lsn::text, c.recorded_at,
			c.system_id = walrelay_system_id() AND c.database_name = current_database()
			AND c.timeline = (SELECT timeline_id FROM pg_control_checkpoint())
			AND c.slot_created_at = (SELECT s.created_at FROM walrelay_slots s WHERE s.slot_name = c.slot_name)
		FROM walrelay_confirmed c WHERE c.slot_name = $1`, slot).Scan(&at, &rec.recorded, &rec.here)
	if err == pgx.ErrNoRows {
		return confirmedRecord{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	if rec.lsn, err = pglogrepl.ParseLSN(at); err != nil {
		t.Fatal(err)
	}
	return rec, true
}

// Every at-least-once mode records what the relay confirmed, with where it comes
// from, within a progress interval of the confirmation; exactly-once does not (its
// position in Kafka skips what was produced).
func TestConfirmedPositionIsRecordedInEveryMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		tweak func(*config)
	}{
		{"mark", func(c *config) { c.OnPublish = poller.Mark }},
		{"delete", func(c *config) { c.OnPublish = poller.Delete }},
		{"none", func(c *config) { c.OnPublish = poller.None }},
		{"progress", func(c *config) { c.OnPublish = poller.Progress }},
		{"exactly-once", func(c *config) { c.Delivery = relay.ExactlyOnce }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbURL, broker, conn := outboxWithBroker(t)
			slot := "record_" + strings.ReplaceAll(tc.name, "-", "_")
			rn := start(t, dbURL, broker, slot, tc.tweak)
			if !rn.waitLog(time.Minute, "msg=streaming") {
				t.Fatal("the relay did not start streaming")
			}
			consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
			n := len(testenv.WriteTx(t, conn, aggregates("rec", 4), "e", 20, false))
			end := testenv.CurrentLSN(t, conn)
			if !consumer.WaitDistinct(time.Minute, n) {
				t.Fatalf("delivered %d of %d", consumer.Distinct(), n)
			}
			if tc.name == "exactly-once" {
				waitFor(t, time.Minute, "the slot to confirm the events", func() bool { return testenv.SlotLSN(t, conn, slot) >= end })
				rn.stop()
				if rec, ok := readConfirmedRecord(t, conn, slot); ok {
					t.Fatalf("exactly-once recorded a confirmed position (%s); its Kafka position is the one it keeps", rec.lsn)
				}
				return
			}
			var rec confirmedRecord
			waitFor(t, time.Minute, "the confirmed position to be recorded past the events", func() bool {
				var ok bool
				rec, ok = readConfirmedRecord(t, conn, slot)
				return ok && rec.lsn >= end
			})
			if !rec.here {
				t.Errorf("the record names another system, database, slot incarnation or timeline than this slot's")
			}
			if slotAt := testenv.SlotLSN(t, conn, slot); rec.lsn > slotAt {
				t.Errorf("recorded %s, past what the slot was confirmed to (%s)", rec.lsn, slotAt)
			}
		})
	}
}

// A relay that publishes nothing writes no record, however much other WAL the
// server writes (its own record would otherwise bring the next): the record is one
// small row per progress interval while events flow, and none when idle.
func TestIdleRelayRecordsNoConfirmedPosition(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	if rn := start(t, dbURL, broker, "record_idle"); !rn.waitLog(time.Minute, "msg=streaming") {
		t.Fatal("the relay did not start streaming")
	}
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	n := len(testenv.WriteTx(t, conn, aggregates("idle", 2), "e", 5, false))
	if !consumer.WaitDistinct(time.Minute, n) {
		t.Fatalf("delivered %d of %d", consumer.Distinct(), n)
	}
	var first confirmedRecord
	waitFor(t, time.Minute, "a record of the events", func() bool {
		var ok bool
		first, ok = readConfirmedRecord(t, conn, "record_idle")
		return ok
	})
	other := testenv.Connect(t, dbURL)
	if _, err := other.Exec(context.Background(), "CREATE TABLE not_outbox (n int)"); err != nil {
		t.Fatal(err)
	}
	stop := testenv.KeepWriting(other, "INSERT INTO not_outbox VALUES (1)")
	// Three progress intervals of other WAL, all of it confirmed.
	began := time.Now()
	var end pglogrepl.LSN
	waitFor(t, time.Minute, "three progress intervals of other WAL, confirmed", func() bool {
		if end == 0 && time.Since(began) > 3*time.Second {
			end = testenv.CurrentLSN(t, conn)
		}
		return end != 0 && testenv.SlotLSN(t, conn, "record_idle") >= end
	})
	stop()
	if rec, _ := readConfirmedRecord(t, conn, "record_idle"); !rec.recorded.Equal(first.recorded) || rec.lsn != first.lsn {
		t.Errorf("an idle relay recorded again: %s at %s, then %s at %s", first.lsn, first.recorded, rec.lsn, rec.recorded)
	}
}

// lostAcksSink never answers the events of one type: their acks are lost.
type lostAcksSink struct {
	sink.Sink
	eventType string
	mu        sync.Mutex
	held      int
}

func (s *lostAcksSink) Publish(e *outbox.Event, done sink.Done) {
	if e.EventType != s.eventType {
		s.Sink.Publish(e, done)
		return
	}
	s.mu.Lock()
	s.held++
	s.mu.Unlock()
}

func (s *lostAcksSink) heldCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// The record never runs ahead of the broker: while an event's ack is lost, the
// record stays below its transaction however many later events are acked, and the
// next relay, after the first stopped without that ack, publishes it.
func TestConfirmedRecordWaitsForLostAcks(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	ks, err := kafka.New(kafka.Config{Brokers: broker.ListenAddrs(), TopicTemplate: kafka.DefaultTopicTemplate})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ks.Close)
	lost := &lostAcksSink{Sink: ks, eventType: "unacked"}
	rn := start(t, dbURL, broker, "record_lost", func(c *config) {
		c.Sink = lost
		c.ShutdownTimeout = time.Second
	})
	if !rn.waitLog(time.Minute, "msg=streaming") {
		t.Fatal("the relay did not start streaming")
	}
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	aggs := aggregates("lost", 2)
	written := testenv.WriteTx(t, conn, aggs, "before", 10, false)
	before := testenv.CurrentLSN(t, conn)
	waitFor(t, time.Minute, "a record past the acked events", func() bool {
		rec, ok := readConfirmedRecord(t, conn, "record_lost")
		return ok && rec.lsn >= before
	})
	pre := testenv.InsertLSN(t, conn) // the unacked transaction commits after it
	unacked := testenv.WriteTx(t, conn, aggs, "unacked", 1, false)[0]
	after := testenv.WriteTx(t, conn, aggs, "after", 10, false)
	written = append(append(written, unacked), after...)
	if !consumer.WaitFor(time.Minute, func() bool {
		for _, ev := range after {
			if consumer.Count(ev.ID) == 0 {
				return false
			}
		}
		return lost.heldCount() == 1
	}) {
		t.Fatal("the events after the unacked one were not delivered")
	}
	// Three progress intervals in which later events were acked.
	began := time.Now()
	waitFor(t, time.Minute, "three progress intervals", func() bool { return time.Since(began) > 3*time.Second })
	// A record past the unacked transaction's commit would skip it at the next start.
	if rec, _ := readConfirmedRecord(t, conn, "record_lost"); rec.lsn > pre {
		t.Fatalf("recorded %s while an event committed after %s waits for its ack (slot at %s)", rec.lsn, pre,
			testenv.SlotLSN(t, conn, "record_lost"))
	}
	rn.stop()

	start(t, dbURL, broker, "record_lost")
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(unacked.ID) > 0 }) {
		t.Fatal("the event whose ack was lost was not published by the next relay")
	}
	for _, ev := range written {
		if consumer.Count(ev.ID) == 0 {
			t.Errorf("event %s (%s) lost", ev.ID, ev.EventType)
		}
	}
}
