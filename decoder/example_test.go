package decoder_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/outbox"
)

func ExampleDecoder_Decode() {
	// What one transaction inserting an outbox row looks like on the wire.
	commit := time.Date(2026, 11, 29, 19, 31, 48, 0, time.UTC)
	stream := [][]byte{
		beginMsg(0x16B3748, commit, 771),
		outboxRelation(defaultCols),
		insertMsg(outboxOID, goodRow().vals(defaultCols)),
		commitMsg(0, 0x16B3748, 0x16B3778, commit),
	}

	d := decoder.New("public", "outbox_events", outbox.DefaultColumns())
	var m decoder.Message
	for _, data := range stream {
		if err := d.Decode(data, &m); err != nil {
			var rowErr *decoder.RowError
			if errors.As(err, &rowErr) {
				fmt.Println("poison row:", err) // the stream is fine; the row is not
				continue
			}
			fmt.Println("stop:", err)
			return
		}
		switch m.Kind {
		case decoder.KindBegin:
			fmt.Println("begin xid", m.Xid)
		case decoder.KindInsert:
			fmt.Println("event", m.Event.EventType, m.Event.AggregateID, m.Event.CreatedAt.Format(time.RFC3339Nano))
		case decoder.KindCommit:
			fmt.Println("commit, confirm up to", m.EndLSN)
		}
	}
	// Output:
	// begin xid 771
	// event order.placed ord-81723 2026-11-29T19:31:48.123456Z
	// commit, confirm up to 0/16B3778
}
