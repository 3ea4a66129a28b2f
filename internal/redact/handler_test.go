package redact_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/walrelay/walrelay/internal/redact"
)

// Every place a log line carries text is redacted: the message, string, error and
// list attributes, groups and attributes added with With; values noted after the
// handler was built count too.
func TestHandler(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	values := []string{"nats://Tok3nOne@n1:4222"}
	current := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), values...)
	}
	var out bytes.Buffer
	log := slog.New(redact.Handler(slog.NewJSONHandler(&out, nil), current)).With("url", "nats://Tok3nOne@n1:4222")
	log.Info("connect to nats://Tok3nOne@n1:4222 failed",
		"err", errors.New("auth Tok3nOne refused"), "brokers", []string{"nats://Tok3nOne@n1:4222"},
		slog.Group("g", "inner", "still Tok3nOne"))
	mu.Lock()
	values = append(values, "postgres://relay:Passw0rdTwo@db/app")
	mu.Unlock()
	log.Warn("later", "db", "postgres://relay:Passw0rdTwo@db/app", "word", "Passw0rdTwo")
	text := out.String()
	for _, secret := range []string{"Tok3nOne", "Passw0rdTwo"} {
		if strings.Contains(text, secret) {
			t.Errorf("the log shows %s:\n%s", secret, text)
		}
	}
	for _, want := range []string{`"msg":"connect to nats://xxxxx@n1:4222 failed"`, `"url":"nats://xxxxx@n1:4222"`,
		`"err":"auth xxxxx refused"`, `"brokers":["nats://xxxxx@n1:4222"]`, `"g":{"inner":"still xxxxx"}`,
		`"db":"postgres://relay:xxxxx@db/app"`} {
		if !strings.Contains(text, want) {
			t.Errorf("the log lacks %s:\n%s", want, text)
		}
	}
}
