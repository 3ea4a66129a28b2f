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
		Slot        string   `json:"slot"`
		SlotActive  bool     `json:"slot_active"`
		DeadLetters int64    `json:"dead_letters"`
		Problems    []string `json:"problems"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &st); err != nil {
		t.Fatalf("status --json is not JSON: %v\n%s", err, res.stdout)
	}
	if st.Slot != slot || !st.SlotActive || st.DeadLetters != 0 || len(st.Problems) != 0 {
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
