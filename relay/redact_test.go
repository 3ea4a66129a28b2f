package relay_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/relay"
)

// Config.BrokerAddrs may carry a URL with a token (a NATS user without a password):
// the WARN line and /readyz, which asks for no token, show it redacted.
func TestBrokerAddrsTokenNotShown(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	addr := freeAddr(t)
	const token = "T0kenInBrokerAddrs"
	rn := start(t, dbURL, broker, "redactaddrs", func(c *config) {
		c.MetricsAddr, c.AckTimeout = addr, time.Second
		c.BrokerAddrs = []string{"nats://" + token + "@" + broker.ListenAddrs()[0]}
	})
	broker.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotEnoughReplicas, Count: -1})
	testenv.WriteTx(t, conn, []string{"r1"}, "e", 3, false)
	if !rn.waitLog(30*time.Second, "broker not acknowledging") {
		t.Fatal("no WARN line while the broker does not acknowledge")
	}
	body := waitHTTP(t, "http://"+addr+"/readyz", http.StatusServiceUnavailable, "nats://xxxxx@"+broker.ListenAddrs()[0])
	if logs := rn.logs.String(); strings.Contains(logs, token) || strings.Contains(body, token) {
		t.Errorf("the token shows:\n/readyz: %s\nlogs:\n%s", body, logs)
	}
}

// A database URL that does not parse is refused by Validate with the driver's
// reason and without its password, which the driver quotes unmasked when it is
// written "password = x" (keyword/value with blanks).
func TestValidateHidesPasswordOfBadURL(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"host=db user=relay password = Pw0Secret port=abc", `host=db password='a\'b Pw0Secret' port=abc`} {
		cfg := relay.DefaultConfig()
		cfg.DatabaseURL, cfg.PrimaryURL = bad, bad
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), "invalid port") {
			t.Fatalf("Validate(%q) = %v, want the driver's reason", bad, err)
		}
		if strings.Contains(err.Error(), "Pw0Secret") {
			t.Errorf("Validate(%q) shows the password: %v", bad, err)
		}
	}
}
