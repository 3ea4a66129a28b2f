package outbox_test

import (
	"context"
	"database/sql"
	"reflect"
	"testing"
	"time"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
)

// Emit and EmitSQL write one transactional logical message per event, decoded only
// when the transaction commits, carrying the event as given with its generated id
// and creation time.
func TestEmitWritesTransactionalMessages(t *testing.T) {
	ctx := context.Background()
	dbURL := testenv.MigratedDatabase(t)
	conn := testenv.Connect(t, dbURL)
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{"CREATE PUBLICATION emit_test FOR TABLE outbox_events",
		"SELECT pg_create_logical_replication_slot('emit_test', 'pgoutput')"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	defer conn.Exec(ctx, "SELECT pg_drop_replication_slot('emit_test')")

	event := func(agg string) outbox.Event {
		return outbox.Event{AggregateType: "order", AggregateID: agg, EventType: "order.created",
			Payload: []byte("{\"a\":  1}"), Headers: []outbox.Header{{Key: "k", Value: "v"}}}
	}
	var want []outbox.Event
	before := time.Now().Add(-time.Second)
	for _, rollback := range []bool{false, true} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ev := event("pgx")
		if err := outbox.Emit(ctx, tx, &ev); err != nil {
			t.Fatal(err)
		}
		stx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		sev := event("sql")
		if err := (outbox.Emitter{Prefix: "custom"}).EmitSQL(ctx, stx, &sev); err != nil {
			t.Fatal(err)
		}
		if rollback {
			tx.Rollback(ctx)
			stx.Rollback()
			continue
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := stx.Commit(); err != nil {
			t.Fatal(err)
		}
		want = append(want, ev, sev)
	}

	rows, err := conn.Query(ctx, `SELECT data FROM pg_logical_slot_get_binary_changes('emit_test', NULL, NULL,
		'proto_version', '1', 'publication_names', 'emit_test', 'messages', 'true')`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	byPrefix := map[string]*decoder.Decoder{}
	for _, prefix := range []string{outbox.DefaultMessagePrefix, "custom"} {
		byPrefix[prefix] = decoder.New("public", "outbox_events", outbox.DefaultColumns())
		byPrefix[prefix].DecodeMessages(prefix)
	}
	var got []outbox.Event
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			t.Fatal(err)
		}
		for _, d := range byPrefix {
			var m decoder.Message
			if err := d.Decode(data, &m); err != nil {
				t.Fatal(err)
			}
			if m.Kind == decoder.KindMessage {
				got = append(got, m.Event)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded events\n%+v\nwant the committed ones\n%+v", got, want)
	}
	for _, ev := range got {
		if len(ev.ID) != 36 || ev.CreatedAt.Before(before) || ev.CreatedAt.After(time.Now()) {
			t.Errorf("event id %q, created at %s: want a generated UUID and the time of Emit", ev.ID, ev.CreatedAt)
		}
	}
}

// Emit checks the event before writing anything.
func TestEmitRejectsInvalidEvents(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   outbox.Event
		em   outbox.Emitter
	}{
		{"no aggregate type", outbox.Event{AggregateID: "a", EventType: "e", Payload: []byte(`{}`)}, outbox.Emitter{}},
		{"no payload", outbox.Event{AggregateType: "t", AggregateID: "a", EventType: "e"}, outbox.Emitter{}},
		{"id not a UUID", outbox.Event{ID: "42", AggregateType: "t", AggregateID: "a", EventType: "e", Payload: []byte(`{}`)}, outbox.Emitter{}},
		{"bad table", outbox.Event{AggregateType: "t", AggregateID: "a", EventType: "e", Payload: []byte(`{}`)}, outbox.Emitter{Table: "a;b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A nil transaction: Emit must fail before it uses it.
			if err := tc.em.EmitSQL(context.Background(), nil, &tc.ev); err == nil {
				t.Fatal("no error")
			}
		})
	}
}
