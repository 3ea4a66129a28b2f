package settings

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/redact"
)

// secretValues are values of a URL setting that each carry secrets: a password, a
// token given as a user, secret query parameters, a keyword/value string.
func secretValues(kind string) (values []string, secrets []string) {
	secrets = []string{"PW0secret", "TOKEN1secret", "TK2secret", "SP3secret", "KV4secret", "AK5secret"}
	values = []string{
		"postgres://relay:PW0secret@db1:5432,db2:5432/app?sslpassword=SP3secret&sslmode=require",
		"nats://TOKEN1secret@127.0.0.1:4222",
		"https://u:PW0secret@host:443/path?access_token=TK2secret&Api-Key=AK5secret",
		"host=db user=relay password=KV4secret sslmode=require",
		"host=db password = 'KV4secret with blanks' port=bad",
	}
	if kind == kindURLs {
		values = append(values, "nats://u:PW0secret@n1:4222,nats://TOKEN1secret@n2:4222, tls://n3:4222?auth_token=TK2secret")
	}
	return values, secrets
}

// Every setting named like a URL or endpoint is of a URL kind, and every setting of
// a URL kind, given a value that carries secrets, is shown without them: by
// redact.URL, in the errors the binary prints (redact.Error over LoadedURLs) and in its log lines
// (redact.Handler over LoadedURLs). A URL setting added without the kind fails here.
func TestURLSettingsAreRedacted(t *testing.T) {
	s := New()
	var urlSettings []string
	for _, st := range s.all {
		if (strings.HasSuffix(st.name, "-url") || strings.HasSuffix(st.name, "-endpoint")) && !isURLKind(st.kind) {
			t.Errorf("%s is named like a URL but its kind is %q; give it kindURL (or kindURLs) so it is redacted", st.name, st.kind)
		}
		if isURLKind(st.kind) {
			urlSettings = append(urlSettings, st.name)
		}
	}
	for _, want := range []string{"database-url", "primary-url", "nats-url", "rabbitmq-url", "redis-url", "sqs-endpoint",
		"pubsub-endpoint", "pubsub-emulator-host", "admin-url"} {
		if !slices.Contains(urlSettings, want) {
			t.Errorf("%s is not of a URL kind", want)
		}
	}
	for _, name := range urlSettings {
		st := s.lookup(name)
		values, secrets := secretValues(st.kind)
		for _, v := range values {
			if err := st.set(v); err != nil {
				t.Fatalf("%s: set %q: %v", name, v, err)
			}
			if !slices.Contains(LoadedURLs(), v) {
				t.Errorf("%s: the value %q is not noted for redaction", name, v)
			}
			var logged bytes.Buffer
			logger := slog.New(redact.Handler(slog.NewTextHandler(&logged, nil), LoadedURLs))
			logger.Info("starting with "+v, "url", v, "err", fmt.Errorf("connect to %s: refused", v), "list", []string{v})
			shown := map[string]string{
				"redact.URL":      redact.URL(v),
				"a printed error": redact.Error(fmt.Errorf("parse %q: cannot parse `%s`: bad", v, v), LoadedURLs()...).Error(),
				"a log line":      logged.String(),
			}
			for where, text := range shown {
				for _, secret := range secrets {
					if strings.Contains(text, secret) {
						t.Errorf("%s = %q: %s shows %s: %s", name, v, where, secret, text)
					}
				}
			}
		}
	}
}
