package main_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/walrelay/walrelay/internal/testenv"
)

// A broker URL's secret (a NATS token given as the URL's user, a Redis password)
// shows nowhere while the broker does not acknowledge: not in the walrelay starting
// line, not in the broker watch's WARN line or any other, not on /readyz (which asks
// for no token), not in GET /status, not in `walrelay status`. Each of those still
// names the broker by its redacted URL.
func TestBrokerURLSecretShownNowhere(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sink   string
		secret string
		// broker starts the test's own server and returns the URL, with the secret,
		// the relay is given, the URL as it is shown, the settings that select it,
		// and a function that makes the broker stop acknowledging until the function
		// it returns is called.
		broker func(t *testing.T, secret string) (url, shown string, env []string, silence func() (restore func()))
	}{
		{"nats", "T0kenOfNATS", natsWithToken},
		{"redis", "Passw0rdOfRedis", redisWithPassword},
	} {
		t.Run(tc.sink, func(t *testing.T) {
			t.Parallel()
			url, shown, brokerEnv, silence := tc.broker(t, tc.secret)
			dbURL := testenv.MigratedDatabase(t)
			conn := testenv.Connect(t, dbURL)
			slot, admin := slotName(t, tc.sink), testenv.FreeAddr(t)
			env := relayEnv(dbURL, nil, append([]string{"WALRELAY_SINK=" + tc.sink, "WALRELAY_SLOT=" + slot,
				"WALRELAY_METRICS_ADDR=" + admin, "WALRELAY_ACK_TIMEOUT=1s"}, brokerEnv...)...)
			relay := startProc(t, "relay", env, "run")
			waitStreaming(t, conn, slot, relay)
			restore := silence()
			testenv.WriteTx(t, conn, []string{"redacted"}, "e", 3, false)
			if !poll(30*time.Second, func() bool { return strings.Contains(relay.output.String(), "broker not acknowledging") }) {
				t.Fatalf("no broker watch WARN line while the broker does not acknowledge:\n%s", relay.output.String())
			}
			var readyz string
			if !poll(30*time.Second, func() bool {
				code, body := httpGetCode(t, "http://"+admin+"/readyz")
				readyz = body
				return code == http.StatusServiceUnavailable && strings.Contains(body, "broker not acknowledging")
			}) {
				t.Fatalf("/readyz does not say the broker is not acknowledging: %s", readyz)
			}
			_, adminStatus := httpGetCode(t, "http://"+admin+"/status")
			cli := run(t, 30*time.Second, env, "status")
			cliJSON := run(t, 30*time.Second, env, "status", "--json")
			out := relay.output.String()
			startup := regexp.MustCompile(`(?m)^.*msg="walrelay starting".*$`).FindString(out)
			warn := regexp.MustCompile(`(?m)^.*msg="broker not acknowledging.*$`).FindString(out)
			for where, text := range map[string]string{
				"the walrelay starting line": startup,
				"the broker watch WARN line": warn,
				"the relay's output":         out,
				"/readyz":                    readyz,
				"GET /status":                adminStatus,
				"walrelay status":            cli.stdout + cli.stderr,
				"walrelay status --json":     cliJSON.stdout + cliJSON.stderr,
			} {
				if strings.Contains(text, tc.secret) {
					t.Errorf("%s shows the secret of %s: %s", where, url, text)
				}
			}
			for where, text := range map[string]string{"the walrelay starting line": startup,
				"the broker watch WARN line": warn, "/readyz": readyz, "walrelay status": cli.stdout} {
				if !strings.Contains(text, shown) {
					t.Errorf("%s does not name the broker as %s: %s", where, shown, text)
				}
			}
			restore()
			relay.stop(10 * time.Second)
		})
	}
}

// natsWithToken is the test's own NATS server behind a proxy, reached with the
// token as the URL's user (a server without authorization takes any); silence
// cuts the proxy, and the sink holds its events until it reconnects.
func natsWithToken(t *testing.T, token string) (url, shown string, env []string, silence func() func()) {
	server := strings.TrimPrefix(testenv.NATS(t), "nats://")
	proxy := testenv.NewProxy(t, server)
	stream := fmt.Sprintf("WALRELAY_REDACT_%d", rand.Int64())
	url = "nats://" + token + "@" + proxy.Addr()
	env = []string{"WALRELAY_NATS_URL=" + url, "WALRELAY_NATS_STREAM=" + stream, "WALRELAY_NATS_CREATE_STREAM=true",
		"WALRELAY_TOPIC_TEMPLATE=redact." + strings.ToLower(stream) + ".{aggregate_type}"}
	return url, "nats://xxxxx@" + proxy.Addr(), env, func() func() {
		proxy.Down()
		return proxy.Up
	}
}

// redisWithPassword is the test's own Redis server with requirepass set, reached
// with the password in the URL; silence pauses its writers (CLIENT PAUSE WRITE),
// and the URL's read_timeout=-1 keeps the sink waiting on them.
func redisWithPassword(t *testing.T, password string) (url, shown string, env []string, silence func() func()) {
	ctx := context.Background()
	opts, err := goredis.ParseURL(testenv.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	admin := goredis.NewClient(opts)
	if err := admin.ConfigSet(ctx, "requirepass", password).Err(); err != nil {
		t.Fatal(err)
	}
	admin.Close()
	opts.Password = password
	admin = goredis.NewClient(opts)
	t.Cleanup(func() { admin.Close() })
	url = "redis://:" + password + "@" + opts.Addr + "/0?read_timeout=-1"
	env = []string{"WALRELAY_REDIS_URL=" + url, "WALRELAY_TOPIC_TEMPLATE=" + fmt.Sprintf("redact.%d.{aggregate_type}", rand.Int64())}
	return url, "redis://:xxxxx@" + opts.Addr + "/0?read_timeout=-1", env, func() func() {
		if err := admin.Do(ctx, "CLIENT", "PAUSE", "120000", "WRITE").Err(); err != nil {
			t.Fatal(err)
		}
		return func() {
			if err := admin.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
				t.Error(err)
			}
		}
	}
}

// httpGetCode is httpGet with the status code.
func httpGetCode(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
