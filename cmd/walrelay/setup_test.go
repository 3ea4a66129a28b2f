package main_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/pgcluster"
	"github.com/walrelay/walrelay/internal/testenv"
)

// TestSetupErrorsExit1 runs the relay against databases it cannot work with: it must
// exit 1 at once with a message saying what to do, not retry in a loop.
func TestSetupErrorsExit1(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// setup returns the database URL to run against and extra flags.
		setup func(t *testing.T) (string, []string)
		want  []string
	}{
		{
			name:  "not migrated",
			setup: func(t *testing.T) (string, []string) { return testenv.Database(t), nil },
			want:  []string{"outbox_events does not exist", "walrelay migrate"},
		},
		{
			name: "table without payload",
			setup: func(t *testing.T) (string, []string) {
				dbURL := testenv.MigratedDatabase(t)
				execSQL(t, dbURL, `CREATE TABLE bad_outbox (
					id             UUID        PRIMARY KEY DEFAULT gen_random_uuid(),
					aggregate_type TEXT        NOT NULL,
					aggregate_id   TEXT        NOT NULL,
					event_type     TEXT        NOT NULL,
					created_at     TIMESTAMPTZ NOT NULL DEFAULT now())`)
				return dbURL, []string{"--table", "bad_outbox"}
			},
			want: []string{"bad_outbox", `"payload"`},
		},
		{
			name: "table migrate never touched",
			setup: func(t *testing.T) (string, []string) {
				dbURL := testenv.MigratedDatabase(t)
				execSQL(t, dbURL, `CREATE TABLE outbox (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
					aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)`)
				return dbURL, []string{"--table", "outbox", "--publication", "dbz", "--column-aggregate-type", "aggregatetype",
					"--column-aggregate-id", "aggregateid", "--column-event-type", "type", "--column-created-at", ""}
			},
			want: []string{"public.outbox lacks the bookkeeping columns", "attempts, processed_at, retry_after, last_error, dead_lettered_at",
				"`walrelay migrate --table public.outbox --column-aggregate-type aggregatetype --column-aggregate-id aggregateid " +
					"--column-event-type type --column-created-at '' --publication dbz`"},
		},
		{
			name: "role without REPLICATION",
			setup: func(t *testing.T) (string, []string) {
				dbURL := testenv.MigratedDatabase(t)
				role := fmt.Sprintf("norepl_%d_%d", os.Getpid(), nameSeq.Add(1))
				const password = "norepl-pw"
				execSQL(t, dbURL, "CREATE ROLE "+role+" LOGIN PASSWORD '"+password+"'")
				t.Cleanup(func() {
					execSQL(t, dbURL, "DROP OWNED BY "+role)
					execSQL(t, dbURL, "DROP ROLE "+role)
				})
				execSQL(t, dbURL, "GRANT ALL ON ALL TABLES IN SCHEMA public TO "+role)
				execSQL(t, dbURL, "GRANT CREATE ON DATABASE "+databaseName(t, dbURL)+" TO "+role)
				u, err := url.Parse(dbURL)
				if err != nil {
					t.Fatal(err)
				}
				u.User = url.UserPassword(role, password)
				return u.String(), nil
			},
			want: []string{"lacks the REPLICATION attribute", "WITH REPLICATION"},
		},
		{
			name: "wal_level replica",
			setup: func(t *testing.T) (string, []string) {
				testenv.Database(t) // skips (or fails under CI) like every test when PostgreSQL is missing
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				c, err := pgcluster.Start(ctx, pgcluster.Options{Settings: map[string]string{"wal_level": "replica"}})
				if err != nil {
					t.Fatalf("start a wal_level=replica cluster: %v", err)
				}
				t.Cleanup(func() { _ = c.Close() })
				// migrate works on it, and warns what run will need.
				res := run(t, time.Minute, baseEnv("WALRELAY_DATABASE_URL="+c.URL("postgres")), "migrate")
				if res.code != 0 || !strings.Contains(res.stderr, "warning: wal_level is replica: walrelay run streams only with "+
					"wal_level = logical") || !strings.Contains(res.stderr, "--mode poll") {
					t.Errorf("migrate with wal_level replica: exit %d, want 0 and a warning\n%s%s", res.code, res.stdout, res.stderr)
				}
				// status says no relay can create the slot, and why, not that none has yet.
				res = run(t, time.Minute, baseEnv("WALRELAY_DATABASE_URL="+c.URL("postgres")), "status")
				if res.code == 0 || !strings.Contains(res.stdout, "does not exist, and no relay can create it: wal_level is replica") ||
					!strings.Contains(res.stdout, "--mode poll") || strings.Contains(res.stdout, "walrelay run creates it") {
					t.Errorf("status with wal_level replica: exit %d\n%s%s", res.code, res.stdout, res.stderr)
				}
				return c.URL("postgres"), nil
			},
			want: []string{"wal_level is replica", "wal_level = logical", "restart", "or run with --mode poll"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbURL, args := tc.setup(t)
			kafka := testenv.Kafka(t)
			slot := slotName(t, "")
			args = append([]string{"run", "--slot", slot}, args...)
			created := func() (n int) {
				t.Helper()
				if err := testenv.Connect(t, dbURL).QueryRow(context.Background(), `SELECT
						(SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1) + (SELECT count(*) FROM pg_publication)`,
					slot).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			before := created()
			p := startProc(t, "relay", relayEnv(dbURL, kafka.ListenAddrs()), args...)
			// The setup is checked right after the broker answers; a relay retrying
			// would back off and never exit.
			if code := p.wait(30 * time.Second); code != 1 {
				t.Fatalf("exit code %d, want 1", code)
			}
			out := p.output.String()
			last := lastLine(out)
			if !strings.HasPrefix(last, "walrelay: ") {
				t.Errorf("the last line of stderr should be the error, got %q", last)
			}
			for _, w := range tc.want {
				if !strings.Contains(last, w) {
					t.Errorf("error %q does not mention %q", last, w)
				}
			}
			if strings.Contains(out, "reconnecting") {
				t.Errorf("the relay retried a setup error instead of exiting")
			}
			if strings.Contains(out, "panic") || strings.Contains(out, "goroutine ") {
				t.Errorf("the relay crashed instead of exiting cleanly")
			}
			// Refused before anything was created: no slot pins WAL, no publication.
			if created() != before {
				t.Errorf("the relay created a slot or a publication before refusing the setup")
			}
		})
	}
}

func execSQL(t *testing.T, dbURL, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func databaseName(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// A wrong password is reported as such, first: pgx tries TLS before plain TCP (the
// default sslmode=prefer), and the server here refuses TLS, so the first attempt pgx
// lists is a TLS error. Every subcommand that connects says "password authentication
// failed" before anything else.
func TestWrongPasswordSaysSo(t *testing.T) {
	t.Parallel()
	testenv.Database(t) // skips (or fails under CI) like every test when PostgreSQL is missing
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		t.Fatalf("start a cluster: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	execSQL(t, c.URL("postgres"), "ALTER ROLE postgres PASSWORD 'right-pw'")
	hba := "local all all trust\nhost all ghost 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n"
	if err := os.WriteFile(filepath.Join(c.Dir(), "data", "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		t.Fatal(err)
	}
	execSQL(t, c.URL("postgres"), "SELECT pg_reload_conf()")
	wrong := fmt.Sprintf("postgres://postgres:wrong-pw@127.0.0.1:%d/postgres", c.Port()) // sslmode prefer
	kafka := testenv.Kafka(t)
	const want = `password authentication failed for user "postgres": check the password`
	for _, args := range [][]string{{"migrate"}, {"dlq", "list"}, {"run"}} {
		res := run(t, 30*time.Second, relayEnv(wrong, kafka.ListenAddrs()), args...)
		if res.code != 1 {
			t.Errorf("walrelay %s: exit %d, want 1", strings.Join(args, " "), res.code)
		}
		if got := lastLine(res.stderr); !strings.HasPrefix(got, "walrelay: "+want) {
			t.Errorf("walrelay %s: the error does not start with the password: %s", strings.Join(args, " "), got)
		}
		if strings.Contains(res.stderr, "wrong-pw") {
			t.Errorf("walrelay %s shows the password:\n%s", strings.Join(args, " "), res.stderr)
		}
	}
	res := run(t, 30*time.Second, relayEnv(wrong, kafka.ListenAddrs()), "status")
	if res.code != 3 || !strings.Contains(res.stdout, "problem (database): "+want) {
		t.Errorf("status: exit %d (want 3)\n%s%s", res.code, res.stdout, res.stderr)
	}
	if strings.Contains(res.stdout+res.stderr, "rds_iam") {
		t.Errorf("status gives IAM's advice without --database-auth aws-iam:\n%s%s", res.stdout, res.stderr)
	}

	// Each reason with its own advice, and no TLS attempt before it.
	for _, tc := range []struct{ url, want, wrongAdvice string }{
		{fmt.Sprintf("postgres://ghost@127.0.0.1:%d/postgres", c.Port()),
			`role "ghost" does not exist: check the user name in the database URL, or create the role`, "pg_hba.conf"},
		{fmt.Sprintf("postgres://postgres:right-pw@127.0.0.1:%d/nodb", c.Port()),
			`database "nodb" does not exist: check the database name in the database URL`, "pg_hba.conf"},
	} {
		res := run(t, 30*time.Second, relayEnv(tc.url, kafka.ListenAddrs()), "migrate")
		got := lastLine(res.stderr)
		if res.code != 1 || !strings.HasPrefix(got, "walrelay: "+tc.want) || strings.Contains(got, tc.wrongAdvice) ||
			strings.Contains(got, "tls error") {
			t.Errorf("migrate on %s: exit %d, %s\nwant exit 1 and %q first, no TLS attempt, no %q", tc.url, res.code, got, tc.want, tc.wrongAdvice)
		}
	}
}

// A URL of another database's scheme is refused with the schemes PostgreSQL's take,
// the URL redacted, by every command that takes one.
func TestForeignURLSchemeSaysSo(t *testing.T) {
	t.Parallel()
	const url = "mysql://bob:secret-pw@db:3306/app"
	for _, args := range [][]string{{"run"}, {"migrate"}, {"status"}} {
		res := run(t, 30*time.Second, relayEnv(url, []string{"127.0.0.1:1"}), args...)
		out := res.stdout + res.stderr
		if res.code == 0 || !strings.Contains(out, "mysql://bob:xxxxx@db:3306/app is not a PostgreSQL URL: the scheme must be postgres:// or postgresql://") ||
			strings.Contains(out, "secret-pw") || strings.Contains(out, "keyword/value (invalid") {
			t.Errorf("walrelay %s: exit %d\n%s", strings.Join(args, " "), res.code, out)
		}
	}
}
