package dbconn_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/dbconn"
)

// A multi-host URL's primary is the same URL asking for the read-write server; a URL
// with one server has none.
func TestPrimaryOfHosts(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"postgres://relay@db-1:5432/app", ""},
		{"postgres://relay@db-1:5432/app?sslmode=prefer", ""},
		{"postgres://relay@db-1:5432,db-2:5432/app?target_session_attrs=standby",
			"postgres://relay@db-1:5432,db-2:5432/app?target_session_attrs=read-write"},
		{"postgres://relay@db-1,db-2/app", "postgres://relay@db-1,db-2/app?target_session_attrs=read-write"},
		{"host=db-1,db-2 user=relay dbname=app target_session_attrs=prefer-standby",
			"host=db-1,db-2 user=relay dbname=app target_session_attrs=prefer-standby target_session_attrs=read-write"},
		{"host=db-1 user=relay dbname=app", ""},
	} {
		got := dbconn.PrimaryOfHosts(tc.url)
		if got != tc.want {
			t.Errorf("PrimaryOfHosts(%q) = %q, want %q", tc.url, got, tc.want)
			continue
		}
		if got == "" {
			continue
		}
		// pgx reads the result, and checks the server it connects to.
		cfg, err := pgconn.ParseConfig(got)
		if err != nil {
			t.Fatalf("%q: %v", got, err)
		}
		if cfg.ValidateConnect == nil {
			t.Errorf("%q: pgx does not check the server it connects to", got)
		}
	}
}
