package main_test

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
)

// README's two roles: migrate as the owner, run as a relay role. Before its grants,
// run as the relay role stops with one error naming the GRANT to run, before any
// worker starts; migrate --grant-to --dry-run prints every statement and what only a
// superuser can give; migrate --grant-to grants them, and run then relays.
func TestMigrateGrantsTheRelayRole(t *testing.T) {
	t.Parallel()
	o := newOutboxEnv(t)
	role := fmt.Sprintf("relay_grants_%d_%d", os.Getpid(), nameSeq.Add(1))
	execSQL(t, o.dbURL, "CREATE ROLE "+role+" LOGIN")
	t.Cleanup(func() {
		execSQL(t, o.dbURL, "DROP OWNED BY "+role)
		execSQL(t, o.dbURL, "DROP ROLE "+role)
	})
	u, err := url.Parse(o.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	quoted := `"` + role + `"`
	relayEnvOf := relayEnv(u.String(), o.kafka.ListenAddrs(), "WALRELAY_SLOT="+o.slot, "WALRELAY_LOG_FORMAT=text")

	res := run(t, time.Minute, o.env, "migrate", "--grant-to", role, "--dry-run")
	for _, want := range []string{
		`GRANT SELECT, UPDATE, DELETE ON "outbox_events" TO ` + quoted + "; -- read, mark and retry, delete published rows",
		"GRANT SELECT, INSERT, UPDATE ON walrelay_confirmed TO " + quoted + ";",
		"for a superuser to run (migrate cannot grant these):\n  ALTER ROLE " + quoted + " REPLICATION;",
	} {
		if res.code != 0 || !strings.Contains(res.stdout, want) {
			t.Errorf("migrate --grant-to --dry-run: exit %d, want %q in:\n%s%s", res.code, want, res.stdout, res.stderr)
		}
	}

	execSQL(t, o.dbURL, "ALTER ROLE "+role+" REPLICATION") // the superuser's part
	res = run(t, time.Minute, relayEnvOf, "run")
	const advice = "; as the table's owner run GRANT SELECT, UPDATE, DELETE ON "
	if res.code != 1 || !strings.Contains(res.stderr, "role "+role+" lacks SELECT, UPDATE, DELETE on ") ||
		!strings.Contains(res.stderr, advice) || strings.Contains(res.stderr, "permission denied") {
		t.Fatalf("run as the relay role before its grants: exit %d, want 1 and one error naming the GRANT\n%s", res.code, res.stderr)
	}

	res = run(t, time.Minute, o.env, "migrate", "--grant-to", role)
	if res.code != 0 || !strings.Contains(res.stdout, "granted: GRANT SELECT, INSERT, UPDATE ON walrelay_slots TO "+quoted) ||
		strings.Contains(res.stdout, "for a superuser") {
		t.Fatalf("migrate --grant-to: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	p := startProc(t, "relay", relayEnvOf, "run")
	waitStreaming(t, o.conn, o.slot, p)
	consumer := testenv.NewConsumer(t, o.kafka.ListenAddrs(), `outbox\.event\..*`)
	written := testenv.WriteTx(t, o.conn, []string{"g-1"}, "order.granted", 5, false)
	if !consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("delivered %d of %d as the granted role", consumer.Distinct(), len(written))
	}
}
