package main_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/testenv"
)

// TestSettingsPrecedence runs the relay with the slot named by a file (A), the
// environment (B) and a flag (C), and observes which slot the running relay creates:
// flags over environment over file. The database URL and brokers come from the file
// alone in every run, so the file is read even where its slot loses.
func TestSettingsPrecedence(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		useEnv bool // WALRELAY_SLOT=B
		flag   bool // --slot C
		// configByEnv names the file through WALRELAY_CONFIG instead of --config.
		configByEnv bool
		want        string
	}{
		{name: "file", want: "a"},
		{name: "env over file", useEnv: true, configByEnv: true, want: "b"},
		{name: "flag over env and file", useEnv: true, flag: true, want: "c"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbURL := testenv.MigratedDatabase(t)
			kafka := testenv.Kafka(t)
			slots := map[string]string{"a": slotName(t, "a"), "b": slotName(t, "b"), "c": slotName(t, "c")}
			config := writeFile(t, "walrelay.yaml", "database-url: "+dbURL+"\n"+
				"kafka-brokers:\n  - "+strings.Join(kafka.ListenAddrs(), "\n  - ")+"\n"+
				"slot: "+slots["a"]+"\n")

			env := baseEnv("WALRELAY_METRICS_ADDR=", "WALRELAY_LOG_FORMAT=text")
			args := []string{"run"}
			if tc.configByEnv {
				env = append(env, "WALRELAY_CONFIG="+config)
			} else {
				args = append(args, "--config", config)
			}
			if tc.useEnv {
				env = append(env, "WALRELAY_SLOT="+slots["b"])
			}
			if tc.flag {
				args = append(args, "--slot", slots["c"])
			}

			conn := testenv.Connect(t, dbURL)
			candidates := []string{slots["a"], slots["b"], slots["c"]}
			p := startProc(t, "relay", env, args...)
			// Whichever of the three slots the relay streams first is its choice.
			var streamed string
			var err error
			if !poll(30*time.Second, func() bool {
				if p.exited() {
					return true
				}
				err = conn.QueryRow(context.Background(), `SELECT s.slot_name
					FROM pg_replication_slots s JOIN walrelay_slots w USING (slot_name)
					WHERE s.slot_name = ANY($1) AND s.active AND w.catchup_done_at IS NOT NULL`, candidates).Scan(&streamed)
				if errors.Is(err, pgx.ErrNoRows) {
					err = nil
				}
				return err != nil || streamed != ""
			}) {
				t.Fatalf("the relay streamed none of the slots %v within 30s", candidates)
			}
			if p.exited() {
				t.Fatalf("the relay exited with code %d", p.state.ExitCode())
			}
			if err != nil {
				t.Fatalf("read slots: %v", err)
			}
			if streamed != slots[tc.want] {
				t.Errorf("the relay streams slot %s, want %s", streamed, slots[tc.want])
			}
			p.stop(15 * time.Second)

			rows, err := conn.Query(context.Background(),
				"SELECT slot_name FROM pg_replication_slots WHERE slot_name = ANY($1) ORDER BY slot_name", candidates)
			if err != nil {
				t.Fatalf("read slots: %v", err)
			}
			created, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatalf("read slots: %v", err)
			}
			if len(created) != 1 || created[0] != slots[tc.want] {
				t.Errorf("slots created: %v, want only %s", created, slots[tc.want])
			}
		})
	}
}
