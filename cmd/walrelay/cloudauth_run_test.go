package main_test

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
)

// The commands that connect (migrate, dlq, status) take --database-auth aws-iam: each
// signs a token for its connections and works against a database (this one trusts
// any password, so the token itself is not judged here), and no command prints a
// token; a URL the token cannot serve is refused as bad configuration, exit 2.
func TestDatabaseAuthCommands(t *testing.T) {
	t.Parallel()
	dbURL := strings.Replace(testenv.Database(t), "sslmode=disable", "sslmode=prefer", 1)
	if !strings.Contains(dbURL, "sslmode=prefer") {
		t.Fatalf("test database URL %s has no sslmode to change; aws-iam needs TLS offered", dbURL)
	}
	env := baseEnv("WALRELAY_DATABASE_URL="+dbURL, "WALRELAY_DATABASE_AUTH=aws-iam",
		"AWS_ACCESS_KEY_ID=AKIAWALRELAYTEST0003", "AWS_SECRET_ACCESS_KEY=walrelay-cli-secret-key",
		"AWS_REGION=eu-west-1", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_EC2_METADATA_DISABLED=true")
	noToken := func(name string, res result) {
		t.Helper()
		for _, part := range []string{"X-Amz-", "Action=connect", "walrelay-cli-secret-key"} {
			if strings.Contains(res.stdout+res.stderr, part) {
				t.Errorf("%s prints %q, part of a token or the secret:\n%s\n%s", name, part, res.stdout, res.stderr)
			}
		}
	}
	for _, args := range [][]string{{"migrate"}, {"dlq", "list"}} {
		res := run(t, time.Minute, env, args...)
		if res.code != 0 {
			t.Errorf("walrelay %s with --database-auth aws-iam: exit %d\n%s\n%s", strings.Join(args, " "), res.code, res.stdout, res.stderr)
		}
		noToken(strings.Join(args, " "), res)
	}
	res := run(t, time.Minute, env, "status")
	if res.code == 2 || res.code == 3 {
		t.Errorf("status with --database-auth aws-iam: exit %d (bad configuration or database unreadable)\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	noToken("status", res)

	bad := run(t, time.Minute, append(env, "WALRELAY_DATABASE_URL="+strings.Replace(dbURL, "postgres@", "postgres:pw@", 1)), "status")
	if bad.code != 2 || !strings.Contains(bad.stderr, "carries a password") {
		t.Errorf("status with a password in the URL and aws-iam: exit %d, want 2 saying so\n%s", bad.code, bad.stderr)
	}
}
