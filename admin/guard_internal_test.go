package admin

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// tokenMatches compares SHA-256 digests, so tokens of any length are told apart
// and only the very token matches; the empty string matches no token.
func TestTokenMatches(t *testing.T) {
	const token = "s3cret-admin-token"
	want := tokenDigest(token)
	for _, c := range []struct {
		got   string
		match bool
	}{
		{token, true},
		{"", false},
		{"s3cret-admin-toke", false},        // a prefix
		{token + "x", false},                // longer
		{"S3cret-admin-token", false},       // same length
		{strings.Repeat(token, 100), false}, // far longer
		{token + "\x00", false},             // a trailing NUL
		{"s3cret-admin-token ", false},      // a trailing space
		{strings.ToUpper(token), false},     // case
	} {
		if got := tokenMatches(want, c.got); got != c.match {
			t.Errorf("tokenMatches(%q) = %v, want %v", c.got, got, c.match)
		}
	}
	if d := tokenDigest(""); tokenMatches(d, token) || !tokenMatches(d, "") {
		t.Error("the digest of the empty token matches another, or not itself")
	}
}

// The Host a request may carry: a loopback literal, localhost, a listed name,
// the listener's own address, or the address the request came in on.
func TestForeignHost(t *testing.T) {
	listener := &net.TCPAddr{IP: net.ParseIP("10.0.0.7"), Port: 9731}
	allowed := allowedHosts([]string{"Relay.Internal", " [fd00::1] ", "192.168.1.9"}, listener)
	local := &net.TCPAddr{IP: net.ParseIP("172.17.0.2"), Port: 9731}
	for _, c := range []struct {
		host string
		ok   bool
	}{
		{"127.0.0.1:9731", true}, {"127.9.9.9", true}, {"[::1]:9731", true}, {"localhost:9731", true}, {"LOCALHOST", true},
		{"relay.internal:9731", true}, {"relay.internal", true}, {"[fd00::1]:9731", true}, {"192.168.1.9:9731", true},
		{"10.0.0.7:9731", true}, {"172.17.0.2:9731", true},
		{"evil.example:9731", false}, {"localhost.:9731", false}, {"127.0.0.1.nip.io:9731", false}, {"relay.internal.evil:9731", false},
		{"10.0.0.8:9731", false}, {"", false}, {"0.0.0.0:9731", false},
	} {
		req := httptest.NewRequest(http.MethodGet, "/status", nil)
		req.Host = c.host
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, net.Addr(local)))
		if why := foreignHost(req, allowed); (why == "") != c.ok {
			t.Errorf("Host %q: %q, want allowed %v", c.host, why, c.ok)
		}
	}
}

// A request is cross-site when Sec-Fetch-Site says so or its Origin is not the
// scheme://host:port of its Host; a request with neither is not.
func TestCrossSite(t *testing.T) {
	for _, c := range []struct {
		host, origin, site string
		cross              bool
	}{
		{"127.0.0.1:9731", "", "", false},
		{"127.0.0.1:9731", "http://127.0.0.1:9731", "same-origin", false},
		{"localhost", "http://localhost:80", "", false},
		{"LocalHost:9731", "http://localhost:9731", "", false},
		{"127.0.0.1:9731", "", "none", false},
		{"127.0.0.1:9731", "", "cross-site", true},
		{"127.0.0.1:9731", "", "same-site", true},
		{"127.0.0.1:9731", "http://evil.example", "", true},
		{"127.0.0.1:9731", "https://127.0.0.1:9731", "", true},
		{"127.0.0.1:9731", "http://127.0.0.1:9732", "", true},
		{"127.0.0.1:9731", "http://localhost:9731", "", true},
		{"127.0.0.1:9731", "null", "", true},
		{"127.0.0.1:9731", "http://127.0.0.1:9731/x", "", true},
	} {
		req := httptest.NewRequest(http.MethodPost, "/pause", nil)
		req.Host = c.host
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		if c.site != "" {
			req.Header.Set("Sec-Fetch-Site", c.site)
		}
		if why := crossSite(req); (why != "") != c.cross {
			t.Errorf("Host %q, Origin %q, Sec-Fetch-Site %q: %q, want cross-site %v", c.host, c.origin, c.site, why, c.cross)
		}
	}
}

// A body must be JSON; a request without one passes whatever it says of its type.
func TestNotJSON(t *testing.T) {
	for _, c := range []struct {
		body, ct string
		ok       bool
	}{
		{"", "", true}, {"", "text/plain", true}, {`{}`, "application/json", true}, {`{}`, "Application/JSON; charset=utf-8", true},
		{`{}`, "", false}, {`{}`, "text/plain", false}, {`a=1`, "application/x-www-form-urlencoded", false},
		{`{}`, "application/jsonx", false}, {`{}`, "application/json-seq", false},
	} {
		req := httptest.NewRequest(http.MethodPost, "/dlq/retry", strings.NewReader(c.body))
		if c.ct != "" {
			req.Header.Set("Content-Type", c.ct)
		}
		if why := notJSON(req); (why == "") != c.ok {
			t.Errorf("body %q, Content-Type %q: %q, want allowed %v", c.body, c.ct, why, c.ok)
		}
	}
}
