package relay_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/ops"
	"github.com/walrelay/walrelay/relay"
)

const iamToken = "rds-iam-t0ken-NEVER-LOGGED"

// TestDatabasePasswordHook: a server that takes only a password (scram-sha-256) for
// the relay's role, a URL without one, and Config.DatabasePassword handing out the
// password the way an AWS RDS IAM token provider would. Every connection the relay
// opens asks the hook first (the pool, the leader session, the replication
// connection), a replication connection opened again after its walsender is killed
// asks again, events flow throughout, and the token is in no log line and no error.
func TestDatabasePasswordHook(t *testing.T) {
	t.Parallel()
	pg, adminURL := ownCluster(t, "", nil)
	admin := testenv.Connect(t, adminURL)
	ctx := context.Background()
	if _, err := admin.Exec(ctx, fmt.Sprintf(`CREATE ROLE walrelay_iam LOGIN SUPERUSER REPLICATION PASSWORD '%s'`, iamToken)); err != nil {
		t.Fatal(err)
	}
	var hbaFile string
	if err := admin.QueryRow(ctx, "SHOW hba_file").Scan(&hbaFile); err != nil {
		t.Fatal(err)
	}
	hba, err := os.ReadFile(hbaFile)
	if err != nil {
		t.Fatal(err)
	}
	// First match wins: the relay's role must give a password, everyone else is trusted.
	strict := "host all walrelay_iam 127.0.0.1/32 scram-sha-256\nhost replication walrelay_iam 127.0.0.1/32 scram-sha-256\n"
	if err := os.WriteFile(hbaFile, append([]byte(strict), hba...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User("walrelay_iam")
	dbURL := u.String()

	var calls atomic.Int32
	hook := func(context.Context) (string, error) {
		calls.Add(1)
		return iamToken, nil
	}

	// Without the hook the role cannot log in: the password the server checks is the hook's.
	noHook := relay.DefaultConfig()
	noHook.DatabaseURL = dbURL
	if _, err := ops.ReadStatus(ctx, noHook, ops.StatusLimits{}); err == nil {
		t.Fatal("status connected without a password; the test's pg_hba.conf does not ask for one")
	}
	wrong := noHook
	wrong.DatabasePassword = func(context.Context) (string, error) { return "stale-" + iamToken, nil }
	_, err = ops.ReadStatus(ctx, wrong, ops.StatusLimits{})
	if err == nil || strings.Contains(err.Error(), iamToken) {
		t.Fatalf("status with a stale token: %v (want an error without the token)", err)
	}
	failing := noHook
	failing.DatabasePassword = func(context.Context) (string, error) { return "", errors.New("no AWS credentials") }
	if _, err = ops.ReadStatus(ctx, failing, ops.StatusLimits{}); err == nil || !strings.Contains(err.Error(), "no AWS credentials") {
		t.Fatalf("status with a failing provider: %v (want its error)", err)
	}

	broker := testenv.Kafka(t)
	rn := start(t, dbURL, broker, "iam", func(c *config) { c.DatabasePassword = hook })
	consumer := testenv.NewConsumer(t, broker.ListenAddrs(), `outbox\.event\..*`)
	conn := testenv.Connect(t, adminURL)
	written := testenv.WriteTx(t, conn, aggregates("iam", 4), "before", 20, false)
	if !consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("delivered %d of %d with the hook's password", consumer.Distinct(), len(written))
	}
	before := calls.Load()
	if before < 3 {
		t.Fatalf("the hook was asked %d times; want one for each of the pool, the leader session and the replication connection", before)
	}

	pid := walsenderPID(t, conn, "iam")
	if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	if !rn.waitLog(time.Minute, "reconnect") {
		t.Fatalf("no reconnect logged after the walsender was terminated:\n%s", rn.logs.String())
	}
	written = append(written, testenv.WriteTx(t, conn, aggregates("iam", 4), "after", 20, false)...)
	if !consumer.WaitDistinct(time.Minute, len(written)) {
		t.Fatalf("delivered %d of %d after the reconnect", consumer.Distinct(), len(written))
	}
	var active *int
	if err := conn.QueryRow(ctx, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = 'iam'").Scan(&active); err != nil {
		t.Fatal(err)
	}
	if active == nil || *active == pid {
		t.Fatalf("slot iam streamed by %v after walsender %d was terminated; want a new replication connection", active, pid)
	}
	if after := calls.Load(); after <= before {
		t.Errorf("the hook was asked %d times before the reconnect and %d after; a new replication connection must ask again", before, after)
	}
	rn.stop()
	if logs := rn.logs.String(); strings.Contains(logs, iamToken) {
		t.Fatalf("the token appears in the logs:\n%s", logs)
	}
}
