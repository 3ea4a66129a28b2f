package main_test

import (
	"strings"
	"testing"
	"time"
)

// A database URL that does not parse is reported with the driver's reason, and
// without its password: the PostgreSQL driver masks only the passwords it
// recognises in the string it quotes (not "password = x", not a quoted one with an
// escaped quote), so every subcommand that reads database-url or primary-url
// redacts the error again.
func TestDatabaseURLParseErrorHidesPassword(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, secret string }{
		{"host=127.0.0.1 user=relay password = Kv0Secret port=abc", "Kv0Secret"},
		{`host=127.0.0.1 password='it\'s Kv1Secret' port=abc`, "Kv1Secret"},
		{"postgres://relay:Url2Secret@127.0.0.1:bad/app", "Url2Secret"},
	} {
		for _, args := range [][]string{{"run"}, {"status"}, {"migrate"}} {
			for _, setting := range []string{"WALRELAY_DATABASE_URL", "WALRELAY_PRIMARY_URL"} {
				env := baseEnv(setting+"="+tc.url, "WALRELAY_KAFKA_BROKERS=127.0.0.1:9", "WALRELAY_METRICS_ADDR=")
				if setting == "WALRELAY_PRIMARY_URL" {
					if args[0] != "run" {
						continue // status reads the primary after the database; migrate reads database-url alone
					}
					env = append(env, "WALRELAY_DATABASE_URL=postgres://relay@127.0.0.1:9/app")
				}
				res := run(t, 30*time.Second, env, args...)
				out := res.stdout + res.stderr
				if res.code == 0 || !strings.Contains(out, "cannot parse") {
					t.Errorf("walrelay %s with %s=%q: exit %d, want the parse error:\n%s", args[0], setting, tc.url, res.code, out)
				}
				if strings.Contains(out, tc.secret) {
					t.Errorf("walrelay %s with %s=%q shows the password:\n%s", args[0], setting, tc.url, out)
				}
			}
		}
	}
}
