package main_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
)

// status and dlq, as an operator uses them against a running relay's database.
func TestStatusAndDeadLetters(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MigratedDatabase(t)
	broker := testenv.Kafka(t)
	conn := testenv.Connect(t, dbURL)
	slot := slotName(t, "")
	env := relayEnv(dbURL, broker.ListenAddrs(), "WALRELAY_SLOT="+slot)
	relay := startProc(t, "relay", env, "run")
	waitStreaming(t, conn, slot, relay)

	res := run(t, 30*time.Second, env, "status", "--json")
	if res.code != 0 {
		t.Fatalf("status of a healthy relay: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	var st struct {
		statusReport
		DeadLetters int64 `json:"dead_letters"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &st); err != nil {
		t.Fatalf("status --json is not JSON: %v\n%s", err, res.stdout)
	}
	if st.Slot != slot || !st.SlotActive || st.DeadLetters != 0 || len(st.Problems) != 0 || !st.OK {
		t.Fatalf("status: %+v", st)
	}

	// Two rows the poller gave up on, one of them long ago. Any INSERT is a new event
	// the relay publishes, so the rows are published first and then made to look
	// like dead letters.
	ctx := context.Background()
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	var ids []string
	for _, ev := range testenv.WriteTx(t, conn, []string{"dl"}, "stuck", 2, false) {
		ids = append(ids, ev.ID)
	}
	if !consumer.WaitDistinct(time.Minute, 2) {
		t.Fatal("rows not published")
	}
	if !poll(30*time.Second, func() bool {
		var pending int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM outbox_events_pending").Scan(&pending)
		return err == nil && pending == 0
	}) {
		t.Fatal("rows not published")
	}
	for i, age := range []string{"1 hour", "40 days"} {
		if _, err := conn.Exec(ctx, `UPDATE outbox_events SET processed_at = NULL, attempts = 10,
			last_error = 'MESSAGE_TOO_LARGE', dead_lettered_at = now() - $2::interval WHERE id = $1`, ids[i], age); err != nil {
			t.Fatal(err)
		}
	}

	res = run(t, 30*time.Second, env, "status")
	if res.code != 1 || !strings.Contains(res.stdout, "2 dead letters") {
		t.Fatalf("status with dead letters: exit %d (want 1)\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res = run(t, 30*time.Second, env, "status", "--max-dead-letters", "5"); res.code != 0 {
		t.Fatalf("status under --max-dead-letters: exit %d\n%s", res.code, res.stdout)
	}

	res = run(t, 30*time.Second, env, "dlq", "list", "--json")
	var letters []struct {
		ID        string `json:"id"`
		Attempts  int    `json:"attempts"`
		LastError string `json:"last_error"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &letters); err != nil || len(letters) != 2 ||
		letters[0].ID != ids[0] || letters[1].ID != ids[1] || letters[0].Attempts != 10 {
		t.Fatalf("dlq list --json (by created_at): %v\n%s", err, res.stdout)
	}
	if res = run(t, 30*time.Second, env, "dlq", "list"); !strings.Contains(res.stdout, "MESSAGE_TOO_LARGE") ||
		!strings.Contains(res.stdout, "2 dead letter(s)") {
		t.Fatalf("dlq list table:\n%s", res.stdout)
	}

	res = run(t, 30*time.Second, env, "dlq", "purge", "--older-than", "720h")
	if res.code != 0 || !strings.Contains(res.stdout, "deleted 1 dead letter(s)") {
		t.Fatalf("dlq purge: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = run(t, 30*time.Second, env, "dlq", "retry", "--id", ids[0])
	if res.code != 0 || !strings.Contains(res.stdout, "reset 1 dead letter(s)") {
		t.Fatalf("dlq retry: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	// The running relay's poller publishes the retried row again.
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(ids[0]) > 1 }) {
		t.Fatal("the retried dead letter was not published")
	}
	if res = run(t, 30*time.Second, env, "dlq", "retry"); res.code != 2 {
		t.Fatalf("dlq retry without --id or --all: exit %d, want 2", res.code)
	}
	relay.stop(10 * time.Second)
}

// status and dlq read a Debezium-shaped table through the same config file as run:
// its column settings, or a tables list naming it.
func TestStatusAndDeadLettersOnDebeziumTable(t *testing.T) {
	t.Parallel()
	dbURL := testenv.Database(t)
	broker := testenv.Kafka(t)
	conn := testenv.Connect(t, dbURL)
	execFile(t, conn, "debezium_outbox.sql")
	slot := slotName(t, "")
	const mapping = "column-aggregate-type: aggregatetype\ncolumn-aggregate-id: aggregateid\ncolumn-event-type: type\ncolumn-created-at: \"\"\n"
	config := writeFile(t, "walrelay.yaml", "table: outbox\n"+mapping+"slot: "+slot+"\npublication: "+slot+"\n")
	env := relayEnv(dbURL, broker.ListenAddrs(), "WALRELAY_CONFIG="+config)
	if res := run(t, time.Minute, env, "migrate"); res.code != 0 {
		t.Fatalf("migrate: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	relay := startProc(t, "relay", env, "run")
	waitStreaming(t, conn, slot, relay)
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	ctx := context.Background()
	var id string
	if err := conn.QueryRow(ctx, `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
		VALUES (gen_random_uuid(), 'order', '7', 'OrderCreated', '{"n": 7}') RETURNING id::text`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if !consumer.WaitDistinct(time.Minute, 1) {
		t.Fatal("the row was not published")
	}
	if rep := waitStatus(t, time.Minute, 0, env); rep.Slot != slot || !rep.SlotActive {
		t.Fatalf("status: %+v", rep)
	}

	// The row becomes a dead letter (published first: any insert is an event).
	if _, err := conn.Exec(ctx, `UPDATE outbox SET processed_at = NULL, attempts = 10, last_error = 'MESSAGE_TOO_LARGE',
		dead_lettered_at = now() WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if rep := status(t, env); rep.ExitCode != 1 || !rep.has("dead_letters") {
		t.Fatalf("status with a dead letter: %+v, want exit 1 for the dead letter", rep)
	}
	listFile := writeFile(t, "tables.yaml", "tables:\n  - table: outbox\n    "+strings.ReplaceAll(strings.TrimSpace(mapping), "\n", "\n    ")+"\n")
	for name, e := range map[string][]string{"column settings": env, "tables list": relayEnv(dbURL, nil, "WALRELAY_CONFIG="+listFile)} {
		res := run(t, 30*time.Second, e, "dlq", "list", "--json")
		var letters []struct {
			Table string `json:"table"`
			ID    string `json:"id"`
		}
		if err := json.Unmarshal([]byte(res.stdout), &letters); err != nil || len(letters) != 1 || letters[0].ID != id ||
			letters[0].Table != "public.outbox" {
			t.Fatalf("dlq list --json through the %s: exit %d, %v\n%s%s", name, res.code, err, res.stdout, res.stderr)
		}
	}
	if res := run(t, 30*time.Second, env, "dlq", "retry", "--all"); res.code != 0 || !strings.Contains(res.stdout, "reset 1 dead letter(s)") {
		t.Fatalf("dlq retry: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if !consumer.WaitFor(time.Minute, func() bool { return consumer.Count(id) > 1 }) {
		t.Fatal("the retried dead letter was not published again")
	}
	waitStatus(t, time.Minute, 0, env)
	relay.stop(10 * time.Second)
}
