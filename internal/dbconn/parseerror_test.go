package dbconn_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/dbconn"
)

// A URL of another database's scheme says which schemes PostgreSQL's take, shows the
// URL redacted, and never the driver's keyword/value wording; other parse errors keep
// the driver's words, redacted.
func TestParseError(t *testing.T) {
	for _, tc := range []struct{ url, want, not string }{
		{"mysql://bob:secret@db:3306/app", "mysql://bob:xxxxx@db:3306/app is not a PostgreSQL URL: the scheme must be postgres:// or postgresql://", "keyword/value (invalid"},
		{"postgres://bob:secret@db:99999999/app", "cannot parse", "secret"},
		{"host=db password=secret port=x", "cannot parse", "secret"},
	} {
		_, err := pgx.ParseConfig(tc.url)
		if err == nil {
			t.Fatalf("%s parsed", tc.url)
		}
		got := dbconn.ParseError(err, tc.url).Error()
		if !strings.Contains(got, tc.want) || strings.Contains(got, tc.not) || strings.Contains(got, "secret") {
			t.Errorf("ParseError(%q) = %q, want it to say %q, never %q nor the password", tc.url, got, tc.want, tc.not)
		}
	}
}
