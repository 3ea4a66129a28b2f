package admin_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// guardCall sends method to url with token (none when empty), body as it is (no
// Content-Type of its own) and headers, Host among them, as a browser or another
// client would; it returns the status code and the body.
func guardCall(t *testing.T, method, url, token, body string, headers map[string]string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewBufferString(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// A web page in a browser on the relay's host cannot drive or read the admin API
// of a relay on loopback without a token: a cross-site request is refused (403,
// saying why) and does nothing, a page that rebinds its own name to the relay is
// refused by the Host it sends, and a body that is not JSON is refused (415). The
// command line's and curl's body-less POSTs, and a name listed in AdminHosts, work;
// the profiler is guarded alike; /readyz and /metrics answer any Host.
func TestAdminRefusesWebPages(t *testing.T) {
	t.Parallel()
	dbURL, broker, conn := outboxWithBroker(t)
	addr := freeAddr(t)
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	rn := start(t, dbURL, broker, "guard", func(c *config) {
		c.Registry, c.MetricsAddr, c.Pprof, c.AdminHosts = prometheus.NewRegistry(), addr, true, []string{"relay.test"}
	})
	base := "http://" + addr
	waitHTTP(t, base+"/readyz", http.StatusOK, "streaming")
	// A dead letter, which a forged POST /dlq/retry would reset.
	var dead string
	if err := conn.QueryRow(context.Background(), `INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, payload,
		attempts, last_error, dead_lettered_at) VALUES ('order', 'guard-1', 'secret.payload', '{"card": "4111"}', 5, 'broker said no', now())
		RETURNING id::text`).Scan(&dead); err != nil {
		t.Fatal(err)
	}
	stillDead := func() bool {
		var ok bool
		if err := conn.QueryRow(context.Background(), "SELECT dead_lettered_at IS NOT NULL FROM outbox_events WHERE id = $1::uuid", dead).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	refused := func(t *testing.T, code int, body []byte, want int, reason string) {
		t.Helper()
		if code != want || !strings.Contains(string(body), reason) {
			t.Errorf("%d %s; want %d naming %q", code, body, want, reason)
		}
	}

	t.Run("CrossSitePauseRefused", func(t *testing.T) {
		for _, h := range []map[string]string{
			{"Origin": "http://evil.example"},
			{"Origin": "http://evil.example", "Content-Type": "application/json"},
			{"Origin": "http://127.0.0.1:1"},
			{"Origin": "http://localhost:" + port},
			{"Origin": "null"},
			{"Sec-Fetch-Site": "cross-site"},
			{"Sec-Fetch-Site": "same-site"},
		} {
			for _, path := range []string{"/pause", "/resume", "/replay", "/dlq/retry"} {
				body := ""
				if path == "/replay" || path == "/dlq/retry" {
					body = `{"all": true}`
					if path == "/replay" {
						body = `{"dry_run": true}`
					}
				}
				code, answer := guardCall(t, "POST", base+path, "", body, h)
				want := "origin"
				if h["Sec-Fetch-Site"] != "" {
					want = "Sec-Fetch-Site"
				}
				refused(t, code, answer, http.StatusForbidden, want)
			}
		}
		if rn.relay.Paused() {
			t.Error("a cross-site POST /pause paused the relay")
		}
		if !stillDead() {
			t.Error("a cross-site POST /dlq/retry reset a dead letter")
		}
	})

	t.Run("DNSRebindingReadRefused", func(t *testing.T) {
		// The page at http://evil.example:PORT, its name now resolving to 127.0.0.1,
		// asks its own origin: same-origin in the browser's eyes.
		evil := "evil.example:" + port
		for _, path := range []string{"/dlq", "/status", "/replay/any", "/debug/pprof/", "/debug/pprof/goroutine?debug=1"} {
			for _, h := range []map[string]string{
				{"Host": evil},
				{"Host": evil, "Origin": "http://" + evil, "Sec-Fetch-Site": "same-origin"},
				{"Host": "127.0.0.1.evil.example:" + port},
				{"Host": "localhost.:" + port},
			} {
				code, body := guardCall(t, "GET", base+path, "", "", h)
				refused(t, code, body, http.StatusForbidden, "--admin-hosts")
				if bytes.Contains(body, []byte("4111")) || bytes.Contains(body, []byte("goroutine")) {
					t.Errorf("GET %s to Host %s leaked: %s", path, h["Host"], body)
				}
			}
		}
		code, body := guardCall(t, "POST", base+"/pause", "", "", map[string]string{"Host": evil})
		refused(t, code, body, http.StatusForbidden, "--admin-hosts")
		if rn.relay.Paused() {
			t.Error("a POST /pause to Host evil.example paused the relay")
		}
	})

	t.Run("NonJSONBodyRefused", func(t *testing.T) {
		for _, ct := range []string{"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
			h := map[string]string{}
			if ct != "" {
				h["Content-Type"] = ct
			}
			code, body := guardCall(t, "POST", base+"/dlq/retry", "", `{"all": true}`, h)
			refused(t, code, body, http.StatusUnsupportedMediaType, "application/json")
			code, body = guardCall(t, "POST", base+"/replay", "", `{"dry_run": true}`, h)
			refused(t, code, body, http.StatusUnsupportedMediaType, "application/json")
			code, body = guardCall(t, "POST", base+"/pause", "", "x", h)
			refused(t, code, body, http.StatusUnsupportedMediaType, "application/json")
		}
		if rn.relay.Paused() || !stillDead() {
			t.Error("a refused request paused the relay or reset a dead letter")
		}
	})

	t.Run("BodylessPostFromCLIWorks", func(t *testing.T) {
		// What `walrelay pause` sends: a body-less POST, no Origin, no Content-Type.
		code, body := guardCall(t, "POST", base+"/pause", "", "", nil)
		if code != http.StatusOK || !bytes.Contains(body, []byte(`"changed": true`)) || !rn.relay.Paused() {
			t.Fatalf("body-less POST /pause: %d %s, want 200 and the relay paused", code, body)
		}
		// curl -X POST, to localhost.
		code, body = guardCall(t, "POST", base+"/resume", "", "", map[string]string{
			"User-Agent": "curl/8.5.0", "Accept": "*/*", "Host": "localhost:" + port})
		if code != http.StatusOK || !bytes.Contains(body, []byte(`"changed": true`)) || rn.relay.Paused() {
			t.Fatalf("curl POST /resume: %d %s, want 200 and the relay running", code, body)
		}
		// A JSON body from a page of the same origin works.
		code, body = guardCall(t, "POST", base+"/dlq/retry", "", `{"ids": ["`+dead+`"]}`, map[string]string{
			"Content-Type": "application/json", "Origin": base, "Sec-Fetch-Site": "same-origin"})
		if code != http.StatusOK || !bytes.Contains(body, []byte(`"reset": 1`)) || stillDead() {
			t.Fatalf("same-origin JSON POST /dlq/retry: %d %s, want the dead letter reset", code, body)
		}
	})

	t.Run("AdminHostsAllowNamedHost", func(t *testing.T) {
		for _, host := range []string{"relay.test:" + port, "RELAY.test:" + port, "relay.test", "localhost:" + port, "127.0.0.1:" + port, "127.0.0.2:" + port} {
			if code, body := guardCall(t, "GET", base+"/status", "", "", map[string]string{"Host": host}); code != http.StatusOK {
				t.Errorf("GET /status to Host %s: %d %s, want 200", host, code, body)
			}
		}
		if code, body := guardCall(t, "GET", base+"/debug/pprof/", "", "", map[string]string{"Host": "relay.test:" + port}); code != http.StatusOK {
			t.Errorf("GET /debug/pprof/ to Host relay.test: %d %s, want 200", code, body)
		}
		code, body := guardCall(t, "GET", base+"/status", "", "", map[string]string{"Host": "other.test:" + port})
		refused(t, code, body, http.StatusForbidden, "--admin-hosts")
	})

	t.Run("HealthAnswersAnyHost", func(t *testing.T) {
		for _, path := range []string{"/readyz", "/healthz", "/metrics"} {
			if code, body := guardCall(t, "GET", base+path, "", "", map[string]string{"Host": "10.1.2.3:" + port}); code != http.StatusOK {
				t.Errorf("GET %s to Host 10.1.2.3: %d %s, want 200", path, code, body)
			}
		}
	})
}

// The profiler on an address other than loopback asks for the admin token, as the
// admin API does, and refuses a Host that does not name the relay even with it.
func TestPprofNeedsTokenOffLoopback(t *testing.T) {
	t.Parallel()
	dbURL, broker, _ := outboxWithBroker(t)
	_, port, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	const token = "pprof-token"
	start(t, dbURL, broker, "pprofguard", func(c *config) {
		c.Registry, c.MetricsAddr, c.Pprof, c.AdminToken = prometheus.NewRegistry(), net.JoinHostPort("0.0.0.0", port), true, token
	})
	base := "http://" + net.JoinHostPort("127.0.0.1", port)
	waitHTTP(t, base+"/readyz", http.StatusOK, "streaming")
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/symbol"} {
		for _, tok := range []string{"", "wrong"} {
			if code, body := guardCall(t, "GET", base+path, tok, "", nil); code != http.StatusUnauthorized {
				t.Errorf("GET %s with token %q: %d %.80s, want 401", path, tok, code, body)
			}
		}
		if code, body := guardCall(t, "GET", base+path, token, "", nil); code != http.StatusOK {
			t.Errorf("GET %s with the token: %d %.80s, want 200", path, code, body)
		}
		if code, body := guardCall(t, "GET", base+path, token, "", map[string]string{"Host": "evil.example:" + port}); code != http.StatusForbidden {
			t.Errorf("GET %s with the token to Host evil.example: %d %.80s, want 403", path, code, body)
		}
	}
	// Reached at another of the host's addresses, by that address: the wildcard
	// listener's own.
	if ip := hostAddress(); ip != "" {
		other := "http://" + net.JoinHostPort(ip, port)
		if code, body := guardCall(t, "GET", other+"/status", token, "", nil); code != http.StatusOK {
			t.Errorf("GET /status at %s with the token: %d %.80s, want 200", other, code, body)
		}
	} else {
		t.Log("no address but loopback here: the listener's own address is not tried")
	}
}

// hostAddress is an IPv4 address of this host's other than loopback, or "".
func hostAddress() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return ""
}
