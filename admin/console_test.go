package admin_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The console is served from the binary at /ui/, with a policy that keeps it to its
// own origin, and refused to a Host that does not name the relay (the admin API's
// rule). Its files name nothing outside the origin.
func TestConsolePageServed(t *testing.T) {
	t.Parallel()
	dbURL, broker, _ := outboxWithBroker(t)
	addr := freeAddr(t)
	start(t, dbURL, broker, "console_page", func(c *config) {
		c.Registry, c.MetricsAddr = prometheus.NewRegistry(), addr
	})
	base := "http://" + addr
	waitHTTP(t, base+"/readyz", http.StatusOK, "streaming")

	for path, want := range map[string]string{"/ui/": "text/html", "/ui/console.css": "text/css", "/ui/console.js": "text/javascript"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), want) {
			t.Fatalf("GET %s: %s %s, want 200 %s", path, resp.Status, resp.Header.Get("Content-Type"), want)
		}
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") ||
			!strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q does not keep the page to its origin", path, csp)
		}
		// The one absolute URL allowed is SVG's namespace, a name and no request.
		for _, u := range regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}[^"'\s)]*`).FindAllString(body, -1) {
			if u != "http://www.w3.org/2000/svg" && !strings.HasPrefix(u, "//") {
				t.Errorf("%s names %s: the console loads nothing from elsewhere", path, u)
			}
		}
	}
	resp, err := http.Get(base + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if resp.Request.URL.Path != "/ui/" {
		t.Errorf("GET /ui ended at %s, want a redirect to /ui/", resp.Request.URL.Path)
	}
	req, err := http.NewRequest(http.MethodGet, base+"/ui/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "rebound.example"
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "--admin-hosts") {
		t.Errorf("GET /ui/ with Host rebound.example: %s %s, want 403 naming --admin-hosts", resp.Status, body)
	}
	req, _ = http.NewRequest(http.MethodGet, base+"/ui/", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if readAll(t, resp); resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET /ui/ from another site: %s, want 403", resp.Status)
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
