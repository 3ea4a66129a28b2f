package sqs_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv/sqsserver"
	"github.com/walrelay/walrelay/outbox"
	"github.com/walrelay/walrelay/record"
	"github.com/walrelay/walrelay/sink/sqs"
)

// With the record settings a message carries what package record makes of the
// event: the JSON value converter's value as the body, Debezium's header values
// (record-headers debezium: the id alone of walrelay's own, placed columns as
// Connect writes them, a NULL column no attribute since SQS refuses an empty one),
// and a tombstone on an empty payload (tombstone-on-empty-payload).
func TestRecordFormat(t *testing.T) {
	t.Parallel()
	srv := sqsserver.Start(t, sqsserver.Options{})
	srv.CreateQueue("orders", 0)
	cfg := config(srv, "orders")
	cfg.Format = record.Format{ValueConverter: record.JSON, IDHeaderOnly: true, TombstoneOnEmpty: true}
	s := newSink(t, cfg)
	o := newOutcomes()
	e := event("order", "o-1", 1)
	e.Payload, e.PayloadType = []byte(`{"id": 1}`), "jsonb"
	e.Headers = []outbox.Header{
		{Key: "paid", Value: "t", Type: "boolean"},
		{Key: "at", Value: "2024-05-01 14:00:00.123456+02", Type: "timestamp with time zone"},
		{Key: "note", Type: "text", Null: true},
	}
	empty := event("order", "o-1", 2)
	empty.Payload, empty.PayloadType = []byte("  "), "text"
	o.publish(s, e)
	o.publish(s, empty)
	flush(t, s, 10*time.Second)
	for _, ev := range []*outbox.Event{e, empty} {
		if errs := o.of(ev.ID); len(errs) != 1 || errs[0] != nil {
			t.Fatalf("event %s: %v", ev.ID, errs)
		}
	}
	byID := map[string]sqsserver.Message{}
	for _, m := range srv.Messages("orders") {
		byID[m.Attributes["id"]] = m
	}
	// The JSON converter writes a jsonb payload as a JSON string (JsonConverter on
	// the router's string payload), the same bytes as the Kafka sink's value.
	value, _ := cfg.Format.Value(e)
	want := map[string]string{"id": e.ID, "paid": "true", "at": "2024-05-01T12:00:00.123456Z"}
	if m := byID[e.ID]; fmt.Sprint(m.Attributes) != fmt.Sprint(want) || m.Body != `"{\"id\": 1}"` || m.Body != string(value) {
		t.Errorf("message: attributes %v, body %q (record %q); want %v, %q", m.Attributes, m.Body, value, want, `"{\"id\": 1}"`)
	}
	want = map[string]string{"id": empty.ID, "tombstone": "true"}
	if m := byID[empty.ID]; fmt.Sprint(m.Attributes) != fmt.Sprint(want) || m.Body != "null" {
		t.Errorf("blank payload: attributes %v, body %q; want %v and a tombstone", m.Attributes, m.Body, want)
	}
}

// SQS's 10 message attributes count the record's own headers: the id alone under
// record-headers debezium leaves room for four more header columns than
// walrelay's five.
func TestRecordColumnsFit(t *testing.T) {
	cols := outbox.Columns{}
	for i := range 8 {
		cols.Headers = append(cols.Headers, outbox.HeaderColumn{Column: fmt.Sprintf("h%d", i)})
	}
	if err := sqs.CheckRecordColumns(record.Format{IDHeaderOnly: true}, cols); err != nil {
		t.Errorf("8 header columns with Debezium's headers: %v, want them taken (id, tombstone and 8 make 10)", err)
	}
	if err := sqs.CheckRecordColumns(record.Format{}, cols); err == nil || !strings.Contains(err.Error(), "at most 4") {
		t.Errorf("8 header columns with walrelay's headers: %v, want a refusal asking for at most 4", err)
	}
}
