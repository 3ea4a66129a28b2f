package main_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/pgcluster"
	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/migrations"
	"github.com/walrelay/walrelay/relay"
)

// standbyBinaries picks the server for decoding on a standby.
func standbyBinaries(t *testing.T) string {
	t.Helper()
	binDir, err := pgcluster.BinDirAtLeast(relay.StandbyDecodingMajor)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set, but this test needs PostgreSQL binaries that decode on a standby (make setup): " + err.Error())
		}
		t.Skip("needs PostgreSQL binaries that decode on a standby (make setup): " + err.Error())
	}
	return binDir
}

// With the slot on a hot standby, status reads the slot there and the outbox rows on
// the primary, dlq writes to the primary and replay reads there: the standby is
// read-only and its copy of the rows lags. The primary is --primary-url, then the
// read-write server of a --database-url that names both.
func TestStatusAndDLQOnStandby(t *testing.T) {
	t.Parallel()
	testenv.Database(t) // skips (or fails under CI) like every test when PostgreSQL is missing
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	primary, err := pgcluster.Start(ctx, pgcluster.Options{BinDir: standbyBinaries(t)})
	if err != nil {
		t.Fatalf("start the primary: %v", err)
	}
	t.Cleanup(func() { _ = primary.Close() })
	if _, err := migrations.Up(ctx, primary.URL("postgres"), nil); err != nil {
		t.Fatal(err)
	}
	standby, err := primary.StartStandby(ctx, "standby1", nil)
	if err != nil {
		t.Fatalf("start the standby: %v", err)
	}
	t.Cleanup(func() { _ = standby.Close() })
	onPrimary := testenv.Connect(t, primary.URL("postgres"))
	onStandby := testenv.Connect(t, standby.URL("postgres"))
	kafka := testenv.Kafka(t)
	slot := slotName(t, "")
	withPrimaryURL := relayEnv(standby.URL("postgres"), kafka.ListenAddrs(), "WALRELAY_SLOT="+slot,
		"WALRELAY_PRIMARY_URL="+primary.URL("postgres"))
	bothHosts := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=standby",
		standby.Port(), primary.Port())
	withBothHosts := relayEnv(bothHosts, kafka.ListenAddrs(), "WALRELAY_SLOT="+slot)
	for _, env := range [][]string{withPrimaryURL, withBothHosts} {
		commandsOnStandby(t, ctx, env, onPrimary, onStandby, slot)
	}
}

// commandsOnStandby runs a relay with env until it has published every row, then
// status, dlq and replay without it.
func commandsOnStandby(t *testing.T, ctx context.Context, env []string, onPrimary, onStandby *pgx.Conn, slot string) {
	t.Helper()
	relayProc := startProc(t, "relay", env, "run")
	waitStreaming(t, onStandby, slot, relayProc)
	var rep statusReport
	if !poll(time.Minute, func() bool { rep = status(t, env); return rep.ExitCode == 0 && rep.Pending == 0 }) {
		t.Fatalf("status with the relay streaming: %+v, want exit 0 and every row published", rep)
	}
	if !rep.SlotExists || !rep.SlotActive {
		t.Fatalf("status with the relay streaming the standby's slot: %+v, want the slot there and streamed", rep)
	}
	relayProc.stop(30 * time.Second)

	// Written while no relay runs, the row is pending on the primary at once; the
	// slot is only on the standby.
	ev := testenv.WriteTx(t, onPrimary, []string{"sb"}, "waiting", 1, false)[0]
	rep = status(t, env)
	if rep.ExitCode != 4 || !rep.SlotExists || rep.SlotActive || rep.Pending != 1 {
		t.Fatalf("status with the relay stopped: %+v, want exit 4, the standby's slot there and not streamed, "+
			"the primary's row pending", rep)
	}

	// A dead letter is retried on the primary.
	if _, err := onPrimary.Exec(ctx, `UPDATE outbox_events SET dead_lettered_at = now(), attempts = 5,
			last_error = 'broker said no' WHERE id = $1`, ev.ID); err != nil {
		t.Fatal(err)
	}
	// The standby has the dead letter too: only where dlq writes tells the two apart.
	if !poll(time.Minute, func() bool {
		var replayed bool
		err := onStandby.QueryRow(ctx, "SELECT dead_lettered_at IS NOT NULL FROM outbox_events WHERE id = $1", ev.ID).Scan(&replayed)
		return err == nil && replayed
	}) {
		t.Fatal("the standby did not replay the dead letter within a minute")
	}
	if res := run(t, 30*time.Second, env, "dlq", "list"); res.code != 0 || !strings.Contains(res.stdout, ev.ID) {
		t.Fatalf("dlq list on the standby setup: exit %d, want the dead letter %s listed\n%s%s", res.code, ev.ID, res.stdout, res.stderr)
	}
	if res := run(t, 30*time.Second, env, "dlq", "retry", "--all"); res.code != 0 || !strings.Contains(res.stdout, "reset 1 dead letter") {
		t.Fatalf("dlq retry on the standby setup: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	var dead bool
	if err := onPrimary.QueryRow(ctx, "SELECT dead_lettered_at IS NOT NULL FROM outbox_events WHERE id = $1", ev.ID).Scan(&dead); err != nil || dead {
		t.Fatalf("after dlq retry the row on the primary is still a dead letter (%v, %v)", dead, err)
	}

	// replay reads the primary's rows: one the paused standby has not replayed is
	// found.
	if _, err := onStandby.Exec(ctx, "SELECT pg_wal_replay_pause()"); err != nil {
		t.Fatal(err)
	}
	late := testenv.WriteTx(t, onPrimary, []string{"sb"}, "late", 1, false)[0]
	res := run(t, 30*time.Second, env, "replay", "--dry-run", "--id", late.ID)
	if _, err := onStandby.Exec(ctx, "SELECT pg_wal_replay_resume()"); err != nil {
		t.Fatal(err)
	}
	if res.code != 0 || !strings.Contains(res.stdout, "would replay 1 event(s)") {
		t.Fatalf("replay --dry-run of a row only the primary has yet: exit %d, want 1 event\n%s%s", res.code, res.stdout, res.stderr)
	}
}
