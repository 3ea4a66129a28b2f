package brokers

import (
	"context"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}

// Each server answers at the URL returned, which is not the machine's default port.
func TestServersAnswer(t *testing.T) {
	for _, c := range []struct {
		name, defaultPort string
		start             func(testing.TB) string
		probe             func(context.Context, string) error
	}{
		{"nats", "4222", NATS, probeNATS},
		{"redis", "6379", Redis, probeRedis},
		{"rabbitmq", "5672", RabbitMQ, func(_ context.Context, u string) error { return probeAMQP(u) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			u := c.start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := c.probe(ctx, u); err != nil {
				t.Fatalf("%s: %v", u, err)
			}
			if parsed, err := url.Parse(u); err != nil || parsed.Port() == c.defaultPort {
				t.Errorf("%s: want a port of the test's own, not the default %s (%v)", u, c.defaultPort, err)
			}
		})
	}
}

// A missing server binary is reported as such, naming the package to install, which
// is what makes tests skip outside CI instead of failing.
func TestMissingBinary(t *testing.T) {
	_, err := lookBinary("walrelay-no-such-server", "no-such-package", "/nonexistent/walrelay-no-such-server")
	if !errors.Is(err, errNoBinary) || !strings.Contains(err.Error(), "apt-get install -y no-such-package") {
		t.Fatalf("lookBinary of a missing server: %v", err)
	}
}
