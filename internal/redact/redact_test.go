package redact_test

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/redact"
)

func TestURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		// PostgreSQL: the user name stays, the password and password-like parameters go.
		{"postgres://relay:s3cret@db:5432/app", "postgres://relay:xxxxx@db:5432/app"},
		{"postgresql://relay@db/app?sslmode=require", "postgresql://relay@db/app?sslmode=require"},
		{"postgres://relay@db/app?password=s3cret&sslpassword=k3y&sslmode=verify-full",
			"postgres://relay@db/app?password=xxxxx&sslpassword=xxxxx&sslmode=verify-full"},
		{"postgres://relay:s3cret@h1:5432,h2:5433/app?target_session_attrs=read-write",
			"postgres://relay:xxxxx@h1:5432,h2:5433/app?target_session_attrs=read-write"},
		{"postgres://relay@db/app?sslkey=/k.pem&Pass%77ord=x", "postgres://relay@db/app?sslkey=xxxxx&Pass%77ord=xxxxx"},
		// A password with an unencoded '/', '?' or '#' cuts the URL short: all up to its '@' goes.
		{"postgres://relay:pa/ss@db:5432/app", "postgres://xxxxx@db:5432/app"},
		{"postgres://relay:pa?ss@db/app?sslmode=require", "postgres://xxxxx@db/app?xxxxx"},
		{"amqp://user:pa#ss@rabbit:5672/", "amqp://xxxxx@rabbit:5672/"},
		{"postgres://a@b:c@db/app", "postgres://xxxxx@db/app"},
		{"redis://x@y@db/0", "redis://xxxxx@db/0"},
		// Keyword/value strings.
		{"host=db user=relay password=s3cret dbname=app", "host=db user=relay password=xxxxx dbname=app"},
		{"host=db password = 's3 cret' port=5432", "host=db password=xxxxx port=5432"},
		{`host=db password='it\'s secret' port=abc`, "host=db password=xxxxx port=abc"},
		{"host=db sslpassword=k3y sslkey=/k.pem", "host=db sslpassword=xxxxx sslkey=xxxxx"},
		{`user=u password="quoted hunter2" host=x`, "user=u password=xxxxx xxxxx"},
		{"host=db password='unterminated", "host=db password=xxxxx"},
		{"host=db bogus", "host=db xxxxx"},
		// Brokers: a user without a password is a token.
		{"nats://TOKEN@127.0.0.1:4222", "nats://xxxxx@127.0.0.1:4222"},
		{"nats://user:pw@n1:4222,nats://TOKEN@n2:4222, tls://n3:4222",
			"nats://user:xxxxx@n1:4222,nats://xxxxx@n2:4222, tls://n3:4222"},
		{"nats://n1:4222,n2:4222", "nats://n1:4222,n2:4222"},
		{"amqp://guest:guest@127.0.0.1:5672/vhost", "amqp://guest:xxxxx@127.0.0.1:5672/vhost"},
		{"amqps://u:p,w@rabbit/", "amqps://u:xxxxx@rabbit/"},
		{"redis://:s3cret@127.0.0.1:6379/0", "redis://:xxxxx@127.0.0.1:6379/0"},
		{"rediss://default:s3cret@cache:6380/1?dial_timeout=3s", "rediss://default:xxxxx@cache:6380/1?dial_timeout=3s"},
		{"https://sqs.eu-west-1.amazonaws.com/?X-Amz-Security-Token=abc&Signature=x&AccessKeyId=y&auth",
			"https://sqs.eu-west-1.amazonaws.com/?X-Amz-Security-Token=xxxxx&Signature=x&AccessKeyId=xxxxx&xxxxx"},
		{"http://admin:tok@walrelay:9731/", "http://admin:xxxxx@walrelay:9731/"},
		{"http://tok@walrelay:9731", "http://xxxxx@walrelay:9731"},
		{"http://walrelay:9731/#token=abc", "http://walrelay:9731/#xxxxx"},
		// Bare values.
		{"pubsub.googleapis.com:443", "pubsub.googleapis.com:443"},
		{"tok@host:4222", "xxxxx@host:4222"},
	} {
		if got := redact.URL(tc.in); got != tc.want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestURLs(t *testing.T) {
	t.Parallel()
	got := redact.URLs([]string{"nats://TOKEN@a:4222", "broker:9092"})
	if strings.Join(got, " ") != "nats://xxxxx@a:4222 broker:9092" {
		t.Errorf("URLs = %q", got)
	}
	if redact.URLs(nil) != nil {
		t.Error("URLs(nil) is not nil")
	}
}

// The PostgreSQL driver's parse error quotes the connection string, masking
// passwords only where it recognises them; Error leaves none of a secret.
func TestErrorOfDriverParseError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ conn, secret string }{
		{"host=db password = hunter2 port=abc", "hunter2"},
		{`host=db password='it\'s s3cret' port=abc`, "s3cret"},
		{`user=u password="quoted hunter2" host=x port=y`, "hunter2"},
		{"host=db password=hunter2 bogus", "hunter2"},
		{"postgres://u:hunter2@db:bad/app", "hunter2"},
		{"postgres://u:hun/ter2@db:5432/app", "ter2"},
		{"postgres://u@db/app?sslpassword=hunter2&port=x", "hunter2"},
	} {
		_, perr := pgconn.ParseConfig(tc.conn)
		if perr == nil {
			t.Fatalf("%q parsed; the case needs a string that does not", tc.conn)
		}
		err := redact.Error(fmt.Errorf("database url: %w", perr), tc.conn)
		if strings.Contains(err.Error(), tc.secret) {
			t.Errorf("%q: the error shows %q: %v", tc.conn, tc.secret, err)
		}
		if !strings.HasPrefix(err.Error(), "database url: cannot parse `") {
			t.Errorf("%q: the error lost its text: %v", tc.conn, err)
		}
		var pce *pgconn.ParseConfigError
		if !errors.As(err, &pce) {
			t.Errorf("%q: errors.As no longer finds the driver's error", tc.conn)
		}
	}
}

func TestText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		msg    string
		values []string
		want   string
	}{
		{"connect to nats nats://TOKEN@n1:4222: no servers", []string{"nats://TOKEN@n1:4222"},
			"connect to nats nats://xxxxx@n1:4222: no servers"},
		{`parse "nats://TO KEN@n2:4222": invalid character`, []string{"nats://a:4222,nats://TO KEN@n2:4222"},
			`parse "nats://xxxxx@n2:4222": invalid character`},
		// A URL no value names is still redacted.
		{`Get "http://tok@relay:9731/readyz": refused`, nil, `Get "http://xxxxx@relay:9731/readyz": refused`},
		// A secret quoted on its own, as an error about the value may do.
		{`bad password "s3cret!"`, []string{"amqp://u:s3cret!@h/"}, `bad password "xxxxx"`},
		{"nothing secret here", []string{"redis://h:6379/0"}, "nothing secret here"},
	} {
		if got := redact.Text(tc.msg, tc.values...); got != tc.want {
			t.Errorf("Text(%q, %q) = %q, want %q", tc.msg, tc.values, got, tc.want)
		}
	}
}

func TestErrorKeepsTheChain(t *testing.T) {
	t.Parallel()
	if redact.Error(nil, "x") != nil {
		t.Error("Error(nil) is not nil")
	}
	err := redact.Error(fmt.Errorf("open amqp://u:pw@h/: %w", fs.ErrNotExist), "amqp://u:pw@h/")
	if !errors.Is(err, fs.ErrNotExist) || err.Error() != "open amqp://u:xxxxx@h/: file does not exist" {
		t.Errorf("Error = %v (is ErrNotExist: %v)", err, errors.Is(err, fs.ErrNotExist))
	}
}
