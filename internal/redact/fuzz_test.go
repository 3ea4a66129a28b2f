package redact_test

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/redact"
)

// Whatever a setting holds, redacting it neither panics nor shows the password of
// a URL whose user has one, and redacting again changes nothing that was hidden.
func FuzzURL(f *testing.F) {
	for _, seed := range []string{"postgres://u:p@h:5432,h2/db?password=x", "nats://T@a,nats://b", "host=h password='a\\'b' x",
		"a@b@c", "amqp://u:p#q@h/", "redis://:p@h/0?read_timeout=-1", "", "=", "'", "\\", "x://", "://@"} {
		f.Add(seed, "S3cretWord")
	}
	f.Fuzz(func(t *testing.T, value, secret string) {
		got := redact.URL(value)
		if again := redact.URL(got); again != got {
			t.Errorf("URL(URL(%q)) = %q, URL once = %q", value, again, got)
		}
		_ = redact.Text(value+" "+got, value)
		if strings.ContainsAny(secret, ":/?#@&=, \t\n\r\f\v'\"\\;%") || len(secret) < 3 {
			return
		}
		for _, u := range []string{"nats://" + secret + "@host:4222", "amqp://user:" + secret + "@host/", "host=h password=" + secret} {
			if strings.Contains(redact.URL(u), secret) && !strings.Contains("nats://xxxxx@host:4222 amqp://user:xxxxx@host/ host=h password=xxxxx", secret) {
				t.Errorf("URL(%q) = %q shows %q", u, redact.URL(u), secret)
			}
			if strings.Contains(redact.Text("failed: "+u, u), secret) && !strings.Contains("failed: nats://xxxxx@host:4222 amqp://user:xxxxx@host/ host=h password=xxxxx", secret) {
				t.Errorf("Text shows %q: %q", secret, redact.Text("failed: "+u, u))
			}
		}
	})
}
