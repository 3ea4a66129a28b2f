package decoder_test

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/outbox"
)

// logicalMessage is pgoutput's 'M': flags, LSN, prefix, content length, content.
func logicalMessage(transactional bool, prefix string, content []byte) []byte {
	b := []byte{'M', 0}
	if transactional {
		b[1] = 1
	}
	b = binary.BigEndian.AppendUint64(b, 0x16B3748)
	b = append(append(b, prefix...), 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(content)))
	return append(b, content...)
}

func TestDecodeMessage(t *testing.T) {
	ev := outbox.Event{ID: "0b9f4a52-6d3e-4c1a-9a7e-2f6b1c0d8e11", AggregateType: "order", AggregateID: "o-1",
		EventType: "order.created", Payload: []byte(`{"total": 1}`),
		CreatedAt: time.Date(2026, 12, 1, 10, 0, 0, 1000, time.UTC)}
	good := outbox.MarshalMessage(&ev, "")
	second := outbox.MarshalMessage(&ev, "app.second")
	for _, tc := range []struct {
		name     string
		messages bool
		data     []byte
		kind     decoder.Kind
		table    int
		wantErr  bool
	}{
		{"event", true, logicalMessage(true, "walrelay.event", good), decoder.KindMessage, 0, false},
		{"event for the second table", true, logicalMessage(true, "walrelay.event", second), decoder.KindMessage, 1, false},
		{"messages not asked for", false, logicalMessage(true, "walrelay.event", good), decoder.KindSkip, 0, false},
		{"another prefix", true, logicalMessage(true, "walrelay", []byte("heartbeat")), decoder.KindSkip, 0, false},
		{"not transactional", true, logicalMessage(false, "walrelay.event", good), decoder.KindOutsideMessage, 0, false},
		{"content not an event", true, logicalMessage(true, "walrelay.event", []byte("hello")), decoder.KindSkip, 0, true},
		{"unknown table", true, logicalMessage(true, "walrelay.event", outbox.MarshalMessage(&ev, "other")), decoder.KindSkip, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decoder.NewTables([]decoder.Table{
				{Schema: "public", Name: "outbox_events", Columns: outbox.DefaultColumns()},
				{Schema: "app", Name: "second", Columns: outbox.DefaultColumns()},
			})
			if tc.messages {
				d.DecodeMessages("walrelay.event")
			}
			var m decoder.Message
			err := d.Decode(tc.data, &m)
			var me *decoder.MessageError
			if tc.wantErr != errors.As(err, &me) {
				t.Fatalf("error %v, want a *MessageError: %v", err, tc.wantErr)
			}
			if me != nil && (me.Prefix != "walrelay.event" || me.LSN != 0x16B3748 || len(me.Content) == 0) {
				t.Errorf("message error %+v lacks the message's prefix, LSN or content", me)
			}
			if m.Kind != tc.kind || m.Table != tc.table {
				t.Fatalf("kind %v table %d, want %v table %d", m.Kind, m.Table, tc.kind, tc.table)
			}
			if m.Kind == decoder.KindMessage && !reflect.DeepEqual(m.Event, ev) {
				t.Errorf("event %+v, want %+v", m.Event, ev)
			}
		})
	}
}

func TestDecodeMessageRejectsBadFraming(t *testing.T) {
	d := decoder.New("public", "outbox_events", outbox.DefaultColumns())
	d.DecodeMessages("walrelay.event")
	full := logicalMessage(true, "walrelay.event", []byte("abc"))
	for _, data := range [][]byte{full[:5], full[:len(full)-1], append(full, 'x'), []byte("M\x01\x00\x00\x00\x00\x00\x00\x00\x00noterminator")} {
		var m decoder.Message
		var de *decoder.DecodeError
		if err := d.Decode(data, &m); !errors.As(err, &de) {
			t.Errorf("% x: error %v, want a *DecodeError", data, err)
		}
	}
}

// BenchmarkDecodeMessage is BenchmarkDecodeInsert's event as a table-less message.
func BenchmarkDecodeMessage(b *testing.B) {
	payload := `{"order_id":"ord-81723","customer_id":"cus-5521","total":{"amount":4200,"currency":"EUR"},` +
		`"lines":[{"sku":"A-1","qty":2,"price":1500},{"sku":"B-7","qty":1,"price":1200}],"placed_at":"2026-11-29T19:31:48Z"}`
	ev := outbox.Event{ID: "0b9f4a52-6d3e-4c1a-9a7e-2f6b1c0d8e11", AggregateType: "order", AggregateID: "ord-81723",
		EventType: "order.created", Payload: []byte(payload), CreatedAt: time.Date(2026, 11, 29, 19, 31, 48, 0, time.UTC)}
	msg := logicalMessage(true, outbox.DefaultMessagePrefix, outbox.MarshalMessage(&ev, ""))
	d := decoder.New("public", "outbox_events", outbox.DefaultColumns())
	d.DecodeMessages(outbox.DefaultMessagePrefix)
	var m decoder.Message
	if err := d.Decode(msg, &m); err != nil || string(m.Event.Payload) != payload {
		b.Fatalf("decode: %v", err)
	}
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if err := d.Decode(msg, &m); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzDecodeMessage feeds arbitrary content, in a well-framed transactional message
// with the events' prefix and as raw bytes, to a decoder that decodes messages. It
// must never panic, every error must be a *DecodeError or *MessageError, and an
// event must not alias the input.
func FuzzDecodeMessage(f *testing.F) {
	ev := outbox.Event{ID: "0b9f4a52-6d3e-4c1a-9a7e-2f6b1c0d8e11", AggregateType: "order", AggregateID: "o-1",
		EventType: "order.created", Payload: []byte(`{}`), Headers: []outbox.Header{{Key: "k", Value: "v"}}}
	f.Add(outbox.MarshalMessage(&ev, ""))
	f.Add(outbox.MarshalMessage(&ev, "outbox_events"))
	f.Add([]byte("heartbeat"))
	f.Fuzz(func(t *testing.T, content []byte) {
		d := decoder.New("public", "outbox_events", outbox.DefaultColumns())
		d.DecodeMessages(outbox.DefaultMessagePrefix)
		for _, data := range [][]byte{logicalMessage(true, outbox.DefaultMessagePrefix, content), append([]byte{'M'}, content...)} {
			var m decoder.Message
			err := d.Decode(data, &m)
			var de *decoder.DecodeError
			var me *decoder.MessageError
			if err != nil && !errors.As(err, &de) && !errors.As(err, &me) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			if m.Kind != decoder.KindMessage {
				continue
			}
			id, payload := strings.Clone(m.Event.ID), string(m.Event.Payload)
			for i := range data {
				data[i] ^= 0xff
			}
			if m.Event.ID != id || string(m.Event.Payload) != payload {
				t.Fatal("the event aliases the input")
			}
		}
	})
}
